//! Cairn: a self-hosted knowledge server.
//!
//! # The public face
//!
//! This crate is a library (for the `cairn` binary, the end-to-end tests and the benches) with
//! a deliberate public face; everything else is private, so no caller outside the crate can
//! skip a layer (the layout follows mini-redis's `lib.rs`):
//!
//! - [`app`]: assembling and running a server (`start`, `start_with`, `Running`), and the
//!   store it opens.
//! - [`config`]: the one typed configuration.
//! - [`service`]: the use cases ([`service::Cairn`]), callable without HTTP or GraphQL, and the
//!   view types they return.
//! - [`domain`]: the pure vocabulary and rules (roles, visibility, fusion, the lexical
//!   analyzer and BM25).
//! - [`auth`]: principals, tokens and the readable rule, which the tests check against the
//!   store's SQL form.
//! - Re-exported here: the store handle and its error ([`Store`], [`StoreError`], used by the
//!   operator's command line), the event bus's types, the typed job results, the committed
//!   schema's SDL ([`sdl`]) and the extraction child's entry point.
//! - `testing` (feature `testing`): the store's test-only constructors and the statements
//!   the benches time, for `tests/` only.
//!
//! # The private layers
//!
//! (See ARCHITECTURE.md for the invariants each keeps.)
//!
//! - `store`: repositories over sea-orm; the only module that builds queries.
//! - `events`: the team-scoped event bus behind subscriptions (NOTIFY/LISTEN on PostgreSQL).
//! - `jobs`: the durable job queue (leases, retries, cancel), its typed job model and workers.
//! - `ingest`: upload safety steps, blob files, and the ingest job.
//! - `knowledge`: the knowledge-extraction job.
//! - `processing`: document classification, extraction and the `process_document` job.
//! - `roles`: model roles at run time: a team's own `chat`/`utility` endpoint, else the
//!   instance's; seals and opens the teams' API keys.
//! - `graphql`: schema, thin resolvers, dataloaders, error codes; the only GraphQL module.
//! - `mcp`: the MCP server (Streamable HTTP) and its tools' text contracts; the only module
//!   that names `rmcp`.
//! - `http`: axum router, console, health and metrics; `http::graphql` mounts the schema,
//!   `http::mcp` the MCP server behind its bearer-token check.
//!
//! Inside the crate the layers are kept by a test (`tests/layers.rs`), since Rust's module
//! privacy cannot stop one sibling module from importing another.

pub mod app;
pub mod auth;
pub mod config;
pub mod domain;
pub mod service;

mod events;
mod graphql;
mod http;
mod ingest;
mod jobs;
mod knowledge;
mod mcp;
mod processing;
mod roles;
mod store;

#[cfg(feature = "testing")]
pub mod testing;

pub use events::{Bus, Event, EventKind, JobEvent};
pub use graphql::sdl;
pub use ingest::isolate::{child_main as extraction_child_main, COMMAND as EXTRACTION_COMMAND};
pub use jobs::{IngestResult, JobResult, KgResult, ProcessResult};
pub use store::{Store, StoreError};
