/**
 * The kernel's side of one language: a Python kernel that a notebook starts
 * under JupyterLab is told JupyterLab's interface language, so the inline
 * panel (`GradcheckPanel`) and `check()`'s display speak it rather than the
 * kernel's locale. It is told once each time the kernel becomes ready (a
 * start, a restart, a change of kernel), by a silent execution that records
 * nothing in the notebook and does nothing when the package is absent there.
 */
import { ISignal } from '@lumino/signaling';

/** The code that tells a kernel the language (a tag such as `es-ES`). */
export function languageCode(tag: string): string {
  return (
    'try:\n' +
    '    from jupyterlab_gradcheck.core.i18n import follow_interface\n' +
    `    follow_interface(${JSON.stringify(tag)})\n` +
    'except Exception:\n' +
    '    pass\n'
  );
}

/** The part of a kernel the telling needs. */
export interface IKernelLike {
  /** The kernel's info reply: only a Python kernel is told. */
  readonly info: Promise<{ language_info: { name: string } }>;
  requestExecute(content: {
    code: string;
    silent: boolean;
    store_history: boolean;
  }): unknown;
}

/** The part of a notebook's session context the telling watches. */
export interface ISessionLike {
  readonly session: { readonly kernel: IKernelLike | null } | null;
  readonly statusChanged: ISignal<unknown, string>;
}

/**
 * Tell the notebook's kernel `language()` whenever it becomes idle after a
 * start or restart. Returns a function that stops watching.
 */
export function tellKernelLanguage(
  session: ISessionLike,
  language: () => string
): () => void {
  let told: IKernelLike | null = null;
  const onStatus = (_sender: unknown, status: string) => {
    const kernel = session.session?.kernel ?? null;
    if (status === 'restarting' || status === 'starting') {
      told = null;
      return;
    }
    if (status !== 'idle' || !kernel || kernel === told) {
      return;
    }
    told = kernel;
    void kernel.info
      .then(info => {
        if (info.language_info.name === 'python') {
          kernel.requestExecute({
            code: languageCode(language()),
            silent: true,
            store_history: false
          });
        }
      })
      .catch(() => undefined);
  };
  session.statusChanged.connect(onStatus);
  return () => session.statusChanged.disconnect(onStatus);
}
