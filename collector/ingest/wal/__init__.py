"""The write-ahead log of accepted requests: the segment file format (``segments``), what a
start finds in the spool directory (``recovery``) and the live spool (``spool``)."""
