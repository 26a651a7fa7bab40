"""Names the nbgrader pieces share, kept apart so that none imports another for them."""

#: The nbgrader grade_id of the grade cell that receives the ledger's verdict and score.
GRADE_CELL_ID = "gradcheck_ledger"

#: The end of the name of a ledger's blob folder (`ps1.gradcheck.blobs` beside `ps1.gradcheck.jsonl`,
#: core/ledger/blob_store.py).
STORE_SUFFIX = ".gradcheck.blobs"
