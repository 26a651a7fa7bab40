"""A class on JupyterHub with jupyterlab-gradcheck: every student's server under /user/<name>/,
and the witness as a hub-managed service that signs every ledger head the servers report.

Run it with `jupyterhub -f examples/jupyterhub_config.py` from an environment where
jupyterlab-gradcheck and jupyterhub are installed (`pip install 'jupyterlab_gradcheck[grading]'`)
and `configurable-http-proxy` is on PATH (`npm install configurable-http-proxy`). The project's
hub test (`make test-hub`) starts a hub from this very file, with the class list it writes to
GRADCHECK_HUB_DIR/passwords.json, so what is written here is what the test runs.

Settings read from the environment, all optional:
- GRADCHECK_HUB_DIR: where the hub keeps its database, cookie secret, the class list and the
  witness's log and key, mode 0700 (default: ./gradcheck-hub); the students' homes are their
  OS accounts' own;
- GRADCHECK_HUB_PORT: the public port (default 8000); the proxy's API listens on the next port,
  the witness on the one after, the hub's own API on the one after that;
- GRADCHECK_HUB_PROXY: the configurable-http-proxy command (default: found on PATH);
- GRADCHECK_WITNESS_TOKEN: the instructor's token, the only one that reads the whole witness log;
- GRADCHECK_WITNESS_USER: the OS user the witness runs as (the hub must run as root to switch
  to it); its folder GRADCHECK_HUB_DIR/witness is then given to that user, mode 0700, so that no
  student's server can read or write the witness's log or key (docs/jupyterhub.md).

Each student's server runs as the student's own OS account (LocalProcessSpawner): the hub runs as
root, every name on the class list is an account of this machine whose home (mode 0700) is the
server's root, so no student's kernel can read or write another student's home or ledger. The
hub's state (GRADCHECK_HUB_DIR, mode 0700: its database, cookie secret, class list) and the
witness's folder (mode 0700, its own account's with GRADCHECK_WITNESS_USER) are out of every
student's reach too. docs/jupyterhub.md gives the accounts' set-up, and the same class on
Kubernetes.
"""

import json
import os
import shutil
import sys

from jupyterhub.auth import Authenticator
from traitlets import Dict

c = get_config()  # noqa: F821 - provided by JupyterHub when it loads this file

HUB_DIR = os.path.abspath(os.environ.get("GRADCHECK_HUB_DIR", "gradcheck-hub"))
PORT = int(os.environ.get("GRADCHECK_HUB_PORT", "8000"))
PROXY_API_PORT, WITNESS_PORT, HUB_API_PORT = PORT + 1, PORT + 2, PORT + 3
PUBLIC_URL = f"http://127.0.0.1:{PORT}"
os.makedirs(HUB_DIR, mode=0o700, exist_ok=True)
if os.stat(HUB_DIR).st_uid == os.getuid():
    os.chmod(HUB_DIR, 0o700)  # the database, cookie secret and class list: the hub's alone


class ClassListAuthenticator(Authenticator):
    """Students log in with the password the instructor gave each of them (a sample: a real class
    uses its institution's authenticator, e.g. OAuthenticator or LTI)."""

    passwords = Dict(
        key_trait=None,
        value_trait=None,
        config=True,
        help="Each student's login name -> password; only these names may log in.",
    )

    async def authenticate(self, handler, data):
        name, password = data.get("username", ""), data.get("password", "")
        expected = self.passwords.get(name)
        return name if expected is not None and password == expected else None

    def check_allowed(self, username, authentication=None):
        return username in self.passwords


# --- the hub, its proxy and its state, on loopback ---------------------------------------------
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = HUB_API_PORT
c.JupyterHub.db_url = "sqlite:///" + os.path.join(HUB_DIR, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(HUB_DIR, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(HUB_DIR, "jupyterhub.pid")
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PROXY_API_PORT}"
c.ConfigurableHTTPProxy.command = [os.environ.get("GRADCHECK_HUB_PROXY") or "configurable-http-proxy"]
c.ConfigurableHTTPProxy.pid_file = os.path.join(HUB_DIR, "proxy.pid")

# --- who may log in ------------------------------------------------------------------------------
c.JupyterHub.authenticator_class = ClassListAuthenticator
# The class list, {"name": "password", ...}, from GRADCHECK_HUB_DIR/passwords.json (kept out of
# version control). Only the names in it exist on the hub and may log in.
PASSWORDS_FILE = os.path.join(HUB_DIR, "passwords.json")
PASSWORDS = {}
if os.path.exists(PASSWORDS_FILE):
    with open(PASSWORDS_FILE, encoding="utf-8") as class_list:
        PASSWORDS = json.load(class_list)
c.ClassListAuthenticator.passwords = PASSWORDS
c.Authenticator.allowed_users = set(PASSWORDS)

# --- every student's single-user server, as the student's own OS account, under /user/<name>/ -----
# LocalProcessSpawner starts each server as the OS user of the student's name (the hub runs as
# root to switch to it), in that account's home: a student's kernel or terminal has her own
# permissions, so another student's home (mode 0700) answers "Permission denied".
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [sys.executable, "-m", "jupyterhub.singleuser"]
c.Spawner.default_url = "/lab"
c.Spawner.args = [
    # One worker process per student: a class shares its machine's cores.
    "--GradcheckExtension.workers=1",
]
# Every ledger head a student's server writes is reported to the witness, through the proxy, with
# the server's own hub token (JUPYTERHUB_API_TOKEN): the witness asks the hub whose token it is.
# Never put GRADCHECK_WITNESS_TOKEN here: that is the instructor's.
c.Spawner.environment = {"GRADCHECK_WITNESS_URL": f"{PUBLIC_URL}/services/witness"}
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120

# --- the witness, a hub-managed service at /services/witness/ ------------------------------------
WITNESS_COMMAND = shutil.which("jupyter-gradcheck", path=os.path.dirname(sys.executable)) or "jupyter-gradcheck"
WITNESS_DIR = os.path.join(HUB_DIR, "witness")
WITNESS_USER = os.environ.get("GRADCHECK_WITNESS_USER", "")
WITNESS = {
    "name": "witness",
    "url": f"http://127.0.0.1:{WITNESS_PORT}",
    "command": [WITNESS_COMMAND, "witness", "--log", os.path.join(WITNESS_DIR, "witness.jsonl")],
    "environment": {"GRADCHECK_WITNESS_TOKEN": os.environ.get("GRADCHECK_WITNESS_TOKEN", "")},
    # The witness needs no scope of its own: it asks the hub who owns each token it is shown.
    "oauth_no_confirm": True,
}
# Its log, its private key (witness.jsonl.key, created 0600) and its public key (.pub) live in a
# folder only the witness's OS user may enter: a student who could write there could rewrite the
# log, and one who could read the key could re-sign it.
os.makedirs(WITNESS_DIR, mode=0o700, exist_ok=True)
if WITNESS_USER:
    WITNESS["user"] = WITNESS_USER  # the hub, as root, starts the witness as this user
    if os.getuid() == 0:
        shutil.chown(WITNESS_DIR, user=WITNESS_USER)
if os.getuid() == 0 or os.stat(WITNESS_DIR).st_uid == os.getuid():
    os.chmod(WITNESS_DIR, 0o700)
c.JupyterHub.services = [WITNESS]
