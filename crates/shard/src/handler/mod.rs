//! Request handling: one file per command family. [`Server::handle`](crate::Server::handle)
//! decodes the body, checks authentication, and dispatches here.
