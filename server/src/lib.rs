//! Cairn: a self-hosted knowledge server.
//!
//! Layout (see ARCHITECTURE.md for the invariants each module keeps):
//!
//! - [`domain`]: pure rules (roles, capabilities, visibility, name rules). No I/O.
//! - [`auth`]: principals, tokens, the readable-document rule.
//! - [`store`]: repositories over sea-orm; the only module that builds queries.
//! - [`service`]: use cases (capability checks + store calls); no GraphQL, no HTTP.
//! - [`events`]: the team-scoped event bus behind subscriptions (NOTIFY/LISTEN on PostgreSQL).
//! - [`jobs`]: the durable job queue (leases, retries, cancel) and its workers.
//! - [`ingest`]: upload safety steps, blob files, and the ingest job.
//! - [`graphql`]: schema, thin resolvers, dataloaders, error codes; the only GraphQL module.
//! - [`http`]: axum router, console, health and metrics.
//! - [`app`]: wiring a server together; [`config`]: the one typed configuration.

pub mod app;
pub mod auth;
pub mod config;
pub mod domain;
pub mod events;
pub mod graphql;
pub mod http;
pub mod ingest;
pub mod jobs;
pub mod knowledge;
pub mod service;
pub mod store;
