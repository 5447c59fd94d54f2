"""What both runtimes read: a project's configuration, its workspace and what is kept in it (quarantine,
the record of a clean run, unresolved failures), its raw tables and the SQL server over it."""
