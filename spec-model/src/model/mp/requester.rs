//! Requester (stub).
