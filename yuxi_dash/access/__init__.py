"""Who may do what and the record of it: roles and the role check, the audit log,
and reading the audit log back.
"""
