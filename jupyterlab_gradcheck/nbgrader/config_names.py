"""Names the nbgrader pieces share, kept apart so that none imports another for them."""

#: The nbgrader grade_id of the grade cell that receives the ledger's verdict and score.
GRADE_CELL_ID = "gradcheck_ledger"
