"""Stage 3, the commit protocol: the order in which a logged model changes its table and its log
(protocol.py, numbered steps), the run lock, the table commit and what its properties record,
snapshots written as attempts with their confirmations, and the mirror that writes them."""
