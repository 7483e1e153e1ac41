//! Refusals that happen before any work, and the per-operation principal of a session.
//!
//! * **Root fields.** An operation may select at most [`MAX_ROOT_FIELDS`] root fields
//!   (aliases and fragments counted): 200 aliased `search` fields are 200 searches, so the
//!   document is refused with QUERY_TOO_COMPLEX right after parsing, before validation,
//!   complexity or any resolver runs.
//! * **String arguments.** Every string argument (literal or variable) is at most
//!   [`MAX_STRING_ARG_CHARS`] characters, BAD_USER_INPUT otherwise; `ingestText(text:)` is the
//!   one exemption (a document body, bounded by the upload cap). Fields apply tighter limits
//!   of their own in `service`.
//! * **Sessions.** On a WebSocket the connection carries a [`Session`], not a principal:
//!   before each operation the session's token is checked again (cached for at most
//!   [`crate::service::RECHECK_AFTER`]) and the operation gets a fresh principal and fresh
//!   dataloaders (per operation, never per socket). A revoked token refuses the operation
//!   with UNAUTHENTICATED and closes the session.

use std::collections::HashSet;
use std::sync::Arc;

use async_graphql::extensions::{
    Extension, ExtensionContext, ExtensionFactory, NextParseQuery, NextPrepareRequest,
};
use async_graphql::parser::types::{
    DocumentOperations, ExecutableDocument, FragmentDefinition, Selection, SelectionSet,
};
use async_graphql::{Name, Pos, Positioned, Request, ServerError, ServerResult, Variables};
use async_graphql_value::Value;

use super::error::{coded, ApiError, BAD_USER_INPUT, QUERY_TOO_COMPLEX};
use super::loaders::Loaders;
use crate::service::{Cairn, Session};

/// Root fields one operation may select.
pub const MAX_ROOT_FIELDS: usize = 20;
/// The longest string argument, in characters (but `text`, see the module docs).
pub const MAX_STRING_ARG_CHARS: usize = 10_000;
/// Arguments exempt from [`MAX_STRING_ARG_CHARS`]: document bodies.
const BODY_ARGUMENTS: &[&str] = &["text"];

pub struct Guard;

impl ExtensionFactory for Guard {
    fn create(&self) -> Arc<dyn Extension> {
        Arc::new(GuardExtension)
    }
}

struct GuardExtension;

fn refuse(code: &'static str, message: String) -> ServerError {
    coded(code, message).into_server_error(Pos::default())
}

#[async_graphql::async_trait::async_trait]
impl Extension for GuardExtension {
    async fn prepare_request(
        &self,
        ctx: &ExtensionContext<'_>,
        request: Request,
        next: NextPrepareRequest<'_>,
    ) -> ServerResult<Request> {
        let mut request = request;
        if let Some(session) = ctx.data_opt::<Session>() {
            let cairn = ctx
                .data::<Cairn>()
                .map_err(|e| e.into_server_error(Pos::default()))?;
            let p = session.principal(cairn).await.map_err(|e| {
                async_graphql::Error::from(ApiError(e)).into_server_error(Pos::default())
            })?;
            request = request.data(Loaders::new(cairn, &p)).data(p);
        }
        next.run(ctx, request).await
    }

    async fn parse_query(
        &self,
        ctx: &ExtensionContext<'_>,
        query: &str,
        variables: &Variables,
        next: NextParseQuery<'_>,
    ) -> ServerResult<ExecutableDocument> {
        let doc = next.run(ctx, query, variables).await?;
        let roots = root_fields(&doc);
        if roots > MAX_ROOT_FIELDS {
            return Err(refuse(
                QUERY_TOO_COMPLEX,
                format!("the operation selects {roots} root fields; at most {MAX_ROOT_FIELDS} are allowed (send several requests)"),
            ));
        }
        if let Some(arg) = long_string_argument(&doc, variables) {
            return Err(refuse(
                BAD_USER_INPUT,
                format!("argument `{arg}` is longer than {MAX_STRING_ARG_CHARS} characters"),
            ));
        }
        Ok(doc)
    }
}

/// The most root fields any operation of the document selects (fragments expanded).
pub fn root_fields(doc: &ExecutableDocument) -> usize {
    let count = |set: &SelectionSet| {
        let mut seen = HashSet::new();
        count_fields(set, doc, &mut seen)
    };
    match &doc.operations {
        DocumentOperations::Single(op) => count(&op.node.selection_set.node),
        DocumentOperations::Multiple(ops) => ops
            .values()
            .map(|op| count(&op.node.selection_set.node))
            .max()
            .unwrap_or(0),
    }
}

fn count_fields(set: &SelectionSet, doc: &ExecutableDocument, seen: &mut HashSet<Name>) -> usize {
    set.items
        .iter()
        .map(|item| match &item.node {
            Selection::Field(_) => 1,
            Selection::InlineFragment(f) => count_fields(&f.node.selection_set.node, doc, seen),
            Selection::FragmentSpread(s) => {
                let name = &s.node.fragment_name.node;
                // A fragment spread twice at the root still runs its fields once each; a cycle
                // is a validation error later. Either way, count each fragment once.
                if !seen.insert(name.clone()) {
                    return 0;
                }
                doc.fragments
                    .get(name)
                    .map_or(0, |f| count_fields(&f.node.selection_set.node, doc, seen))
            }
        })
        .sum()
}

/// The name of the first string argument over the limit, if any.
fn long_string_argument(doc: &ExecutableDocument, variables: &Variables) -> Option<String> {
    let mut sets: Vec<&SelectionSet> = Vec::new();
    match &doc.operations {
        DocumentOperations::Single(op) => sets.push(&op.node.selection_set.node),
        DocumentOperations::Multiple(ops) => {
            sets.extend(ops.values().map(|op| &op.node.selection_set.node))
        }
    }
    sets.extend(
        doc.fragments
            .values()
            .map(|f: &Positioned<FragmentDefinition>| &f.node.selection_set.node),
    );
    let mut body_variables: HashSet<&Name> = HashSet::new();
    let mut stack = sets;
    let mut found = None;
    while let Some(set) = stack.pop() {
        for item in &set.items {
            match &item.node {
                Selection::Field(f) => {
                    for (name, value) in &f.node.arguments {
                        if BODY_ARGUMENTS.contains(&name.node.as_str()) {
                            if let Value::Variable(v) = &value.node {
                                body_variables.insert(v);
                            }
                            continue;
                        }
                        if found.is_none() && too_long(&value.node, variables) {
                            found = Some(name.node.to_string());
                        }
                    }
                    stack.push(&f.node.selection_set.node);
                }
                Selection::InlineFragment(f) => stack.push(&f.node.selection_set.node),
                Selection::FragmentSpread(_) => {}
            }
        }
    }
    if found.is_some() {
        return found;
    }
    // Variables no field uses as a document body.
    variables
        .iter()
        .filter(|(name, _)| !body_variables.contains(name))
        .find(|(_, v)| const_too_long(v))
        .map(|(name, _)| format!("${name}"))
}

fn too_long(v: &Value, variables: &Variables) -> bool {
    match v {
        Value::String(s) => s.chars().count() > MAX_STRING_ARG_CHARS,
        Value::Variable(name) => variables.get(name).is_some_and(const_too_long),
        Value::List(items) => items.iter().any(|i| too_long(i, variables)),
        Value::Object(fields) => fields.values().any(|i| too_long(i, variables)),
        _ => false,
    }
}

fn const_too_long(v: &async_graphql::Value) -> bool {
    match v {
        async_graphql::Value::String(s) => s.chars().count() > MAX_STRING_ARG_CHARS,
        async_graphql::Value::List(items) => items.iter().any(const_too_long),
        async_graphql::Value::Object(fields) => fields.values().any(const_too_long),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(q: &str) -> ExecutableDocument {
        async_graphql::parser::parse_query(q).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn root_fields_count_aliases_and_fragments() {
        let aliases: String = (0..25)
            .map(|i| format!("a{i}: me {{ user {{ name }} }} "))
            .collect();
        assert_eq!(root_fields(&parse(&format!("{{ {aliases} }}"))), 25);
        let q =
            "query { me { user { name } } ...F ... on Query { corpora { edges { cursor } } } } \
                 fragment F on Query { a: me { user { name } } b: me { user { name } } }";
        assert_eq!(root_fields(&parse(q)), 4);
        // Nested fields are not root fields.
        assert_eq!(
            root_fields(&parse("{ me { user { name role } team { name } } }")),
            1
        );
    }
}
