"""Approvals by named people: what an approver signs (`payload`), signing and checking SSH
signatures (`signatures`), where the allowed signers come from (`signers`), and who may approve a
run and how many must (`rules`)."""
