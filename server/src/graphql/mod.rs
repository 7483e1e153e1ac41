//! The GraphQL API (DESIGN.md §9): schema, thin resolvers over [`crate::service`],
//! dataloaders, and the error-code table. The only module that knows GraphQL.

pub mod documents;
pub mod error;
pub mod guard;
pub mod kg;
pub mod loaders;
pub mod models;
pub mod processing;
pub mod search;
pub mod types;

use async_graphql::connection::{Connection, Edge, EmptyFields};
use async_graphql::{Context, Data, Object, Schema, Subscription, ID};
use futures_util::Stream;
use tokio_stream::StreamExt;

use crate::service::{AuthError, Cairn, Principal, ServiceError, Session};
use documents::GqlCorpus;
use error::api;
use error::ErrorCodes;
use loaders::Loaders;
use types::{GqlApiToken, GqlRole, GqlUser, Me, NewToken};

/// The whole API: the foundation's objects merged with the document and job ones.
#[derive(async_graphql::MergedObject, Default)]
pub struct Query(
    CoreQuery,
    documents::DocumentQuery,
    search::SearchQuery,
    kg::KgQuery,
    models::ModelQuery,
    processing::ProcessingQuery,
);

#[derive(async_graphql::MergedObject, Default)]
pub struct Mutation(
    CoreMutation,
    documents::DocumentMutation,
    kg::KgMutation,
    models::ModelMutation,
    processing::ProcessingMutation,
);

#[derive(async_graphql::MergedSubscription, Default)]
pub struct SubscriptionRoot(CoreSubscription, documents::JobSubscription);

pub type CairnSchema = Schema<Query, Mutation, SubscriptionRoot>;

/// Limits that keep abusive queries cheap to refuse.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_depth: usize,
    pub max_complexity: usize,
}

pub fn build_schema(cairn: Cairn, limits: Limits) -> CairnSchema {
    Schema::build(
        Query::default(),
        Mutation::default(),
        SubscriptionRoot::default(),
    )
    .data(cairn)
    .extension(ErrorCodes)
    .extension(guard::Guard)
    .limit_depth(limits.max_depth)
    .limit_complexity(limits.max_complexity)
    .finish()
}

/// The SDL as committed in `schema.graphql`.
pub fn sdl() -> String {
    Schema::build(
        Query::default(),
        Mutation::default(),
        SubscriptionRoot::default(),
    )
    .finish()
    .sdl()
}

/// The connection data of a WebSocket: only its [`Session`]. Each operation gets its own
/// principal (the token checked again) and dataloaders from [`guard::Guard`].
pub fn session_data(session: Session) -> Data {
    let mut data = Data::default();
    data.insert(session);
    data
}

/// Complexity costs of the fields that search, embed, call an LLM or read a whole document:
/// fixed, whatever `first`/`topK` say, so the complexity limit (5,000 by default) bounds the
/// work one request can ask for (at most 20 searches, 5 answers).
pub(crate) mod cost {
    pub const SEARCH: usize = 250;
    pub const SEARCH_ALL: usize = 300;
    pub const ANSWER: usize = 1_000;
    pub const DOCUMENT_TEXT: usize = 100;
    /// `entities(q:)` (name match + embedding); without `q` it is a keyed page.
    pub const ENTITY_QUERY: usize = 250;
    pub const NEIGHBOURHOOD: usize = 150;
    pub const KG_QUERY: usize = 250;
    pub const KNOWLEDGE_SUMMARY: usize = 50;
    /// Up to three system-corpus searches.
    pub const SUGGESTED_CONTEXT: usize = 300;
}

pub(crate) fn principal_of<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Principal> {
    ctx.data_opt::<Principal>()
        .ok_or_else(|| api(ServiceError::Auth(AuthError::MissingToken)))
}

pub(crate) fn loaders_of<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Loaders> {
    ctx.data_opt::<Loaders>()
        .ok_or_else(|| api(ServiceError::Auth(AuthError::MissingToken)))
}

pub(crate) fn cairn_of<'a>(ctx: &Context<'a>) -> async_graphql::Result<&'a Cairn> {
    ctx.data::<Cairn>()
}

/// Object ids are decimal integers; anything else names nothing.
pub(crate) fn parse_id(id: &ID, what: &'static str) -> async_graphql::Result<i64> {
    id.parse::<i64>()
        .map_err(|_| api(ServiceError::NotFound(what)))
}

pub(crate) const MAX_PAGE: usize = 100;

/// Connection cursors are the last row's id.
pub(crate) fn parse_cursor(after: Option<String>) -> async_graphql::Result<Option<i64>> {
    after
        .map(|c| {
            c.parse::<i64>()
                .map_err(|_| api(crate::domain::InvalidInput("invalid cursor".into()).into()))
        })
        .transpose()
}

/// A Relay page from `limit + 1` rows fetched by keyset (the extra row says "there is more").
pub(crate) fn page<R, N: async_graphql::OutputType>(
    rows: Vec<R>,
    limit: usize,
    had_cursor: bool,
    id: impl Fn(&R) -> i64,
    node: impl Fn(R) -> N,
) -> Connection<String, N, EmptyFields, EmptyFields> {
    page_with(rows, limit, had_cursor, |_, r| id(r).to_string(), node)
}

/// [`page`] with a cursor of its own for row `i` of the page.
pub(crate) fn page_with<R, N: async_graphql::OutputType>(
    mut rows: Vec<R>,
    limit: usize,
    had_cursor: bool,
    cursor: impl Fn(usize, &R) -> String,
    node: impl Fn(R) -> N,
) -> Connection<String, N, EmptyFields, EmptyFields> {
    let has_next = rows.len() > limit;
    rows.truncate(limit);
    let mut conn = Connection::new(had_cursor, has_next);
    conn.edges.extend(
        rows.into_iter()
            .enumerate()
            .map(|(i, r)| Edge::new(cursor(i, &r), node(r))),
    );
    conn
}

#[derive(Default)]
pub struct CoreQuery;

#[Object]
impl CoreQuery {
    /// The authenticated caller.
    async fn me(&self, ctx: &Context<'_>) -> async_graphql::Result<Me> {
        principal_of(ctx)?;
        Ok(Me)
    }

    /// The corpora the caller may see: the team's and the system corpora, oldest first.
    #[graphql(complexity = "first.unwrap_or(20).clamp(0, 100) as usize * child_complexity")]
    async fn corpora(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<Connection<String, GqlCorpus, EmptyFields, EmptyFields>> {
        let p = principal_of(ctx)?;
        let limit = first.unwrap_or(20).clamp(0, MAX_PAGE as i32) as usize;
        let after = parse_cursor(after)?;
        let rows = cairn_of(ctx)?
            .corpora(p, after, limit as u64 + 1)
            .await
            .map_err(api)?;
        Ok(page(
            rows,
            limit,
            after.is_some(),
            |c| c.id,
            GqlCorpus::from,
        ))
    }

    /// One corpus. NOT_FOUND (with a null corpus) when it does not exist or belongs to another
    /// team: the two cases are indistinguishable.
    async fn corpus(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<GqlCorpus>> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "corpus")?;
        let c = cairn_of(ctx)?.corpus(p, id).await.map_err(api)?;
        Ok(Some(c.into()))
    }
}

#[derive(Default)]
pub struct CoreMutation;

#[Object]
impl CoreMutation {
    /// Whether the caller's team isolates its content (needs `admin`): on, its uploads are
    /// hashed with a key of its own, so its files are never shared with another team (even
    /// for the same bytes). Applies to uploads from then on.
    async fn set_content_isolation(
        &self,
        ctx: &Context<'_>,
        enabled: bool,
    ) -> async_graphql::Result<types::GqlTeam> {
        let p = principal_of(ctx)?;
        let t = cairn_of(ctx)?
            .set_content_isolation(p, enabled)
            .await
            .map_err(api)?;
        Ok(t.into())
    }

    /// Creates a corpus in the caller's team (needs `corpus.create`).
    async fn create_corpus(
        &self,
        ctx: &Context<'_>,
        name: String,
        description: Option<String>,
    ) -> async_graphql::Result<GqlCorpus> {
        let p = principal_of(ctx)?;
        let c = cairn_of(ctx)?
            .create_corpus(p, &name, description.as_deref())
            .await
            .map_err(api)?;
        Ok(c.into())
    }

    /// Creates a user in the caller's team (needs `admin`; only owners create owners).
    async fn create_user(
        &self,
        ctx: &Context<'_>,
        name: String,
        role: GqlRole,
    ) -> async_graphql::Result<GqlUser> {
        let p = principal_of(ctx)?;
        let u = cairn_of(ctx)?
            .create_user(p, &name, role.into())
            .await
            .map_err(api)?;
        u.try_into()
    }

    /// Mints a token for `userId` (default: yourself; others need `admin`). The secret is in
    /// the reply once and never again.
    async fn create_token(
        &self,
        ctx: &Context<'_>,
        user_id: Option<ID>,
        label: Option<String>,
    ) -> async_graphql::Result<NewToken> {
        let p = principal_of(ctx)?;
        let user_id = user_id.as_ref().map(|u| parse_id(u, "user")).transpose()?;
        let cairn = cairn_of(ctx)?;
        let (row, secret) = cairn
            .create_token(p, user_id, label.as_deref())
            .await
            .map_err(api)?;
        let user = loaders::load(&loaders_of(ctx)?.users, row.user_id)
            .await?
            .ok_or_else(|| api(ServiceError::NotFound("user")))?;
        Ok(NewToken {
            token: secret,
            api_token: GqlApiToken::from(row),
            user: user.try_into()?,
        })
    }

    /// Revokes a token (your own; anyone's in the team with `admin`). Requests made with it
    /// are refused as UNAUTHENTICATED from then on.
    async fn revoke_token(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let p = principal_of(ctx)?;
        let id = parse_id(&id, "token")?;
        cairn_of(ctx)?.revoke_token(p, id).await.map_err(api)
    }
}

#[derive(Default)]
pub struct CoreSubscription;

#[Subscription]
impl CoreSubscription {
    /// Corpora created in the caller's team from now on.
    async fn corpus_created(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<impl Stream<Item = GqlCorpus>> {
        let p = principal_of(ctx)?;
        Ok(cairn_of(ctx)?.corpus_events(p).map(GqlCorpus::from))
    }
}

#[cfg(test)]
mod tests {
    /// The committed `schema.graphql` is the SDL the server serves. Regenerate with
    /// `cargo run -p cairn-server -- schema > schema.graphql`.
    #[test]
    fn committed_schema_is_current() {
        // The running test's own manifest dir (cargo sets it at run time); the compile-time one
        // is stale when a shared target dir reuses a build made from another checkout.
        let dir = std::env::var("CARGO_MANIFEST_DIR")
            .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
        let path = format!("{dir}/../schema.graphql");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == super::sdl(),
            "schema.graphql drifted from the server's SDL: run `cargo run -p cairn-server -- schema > schema.graphql`"
        );
    }
}
