//! Pure rules: no I/O, no database, no GraphQL. Roles, capabilities and visibility live here
//! so that `auth`, `store` and `graphql` all speak the same vocabulary.

use std::fmt;
use std::str::FromStr;

pub mod lexical;
pub mod models;
pub mod search;

/// A user's role inside their team. Ordered from most to least powerful.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Owner,
    Admin,
    Member,
    Viewer,
}

/// What a principal may do. Resolvers never look at roles, only at capabilities.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Capability {
    CorpusCreate,
    CorpusRead,
    DocumentUpload,
    Search,
    WorkflowsRun,
    Admin,
}

impl Capability {
    pub const ALL: [Capability; 6] = [
        Capability::CorpusCreate,
        Capability::CorpusRead,
        Capability::DocumentUpload,
        Capability::Search,
        Capability::WorkflowsRun,
        Capability::Admin,
    ];

    /// The dotted name of DESIGN.md §8 (`corpus.create`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::CorpusCreate => "corpus.create",
            Capability::CorpusRead => "corpus.read",
            Capability::DocumentUpload => "document.upload",
            Capability::Search => "search",
            Capability::WorkflowsRun => "workflows.run",
            Capability::Admin => "admin",
        }
    }
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Owner, Role::Admin, Role::Member, Role::Viewer];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Admin => "admin",
            Role::Member => "member",
            Role::Viewer => "viewer",
        }
    }

    /// The role → capability table. Owners and admins may do everything; members everything
    /// but administration; viewers read and search.
    pub fn has(self, cap: Capability) -> bool {
        match self {
            Role::Owner | Role::Admin => true,
            Role::Member => cap != Capability::Admin,
            Role::Viewer => matches!(cap, Capability::CorpusRead | Capability::Search),
        }
    }

    pub fn capabilities(self) -> impl Iterator<Item = Capability> {
        Capability::ALL.into_iter().filter(move |c| self.has(*c))
    }

    /// Whether a user of this role may mint or revoke tokens of another user of role
    /// `target`: owners for anyone in their team, admins for members and viewers only (an
    /// admin's token for an owner or another admin would let them act above their rank).
    /// Everyone may always manage their own tokens; that case never reaches this rule.
    pub fn may_manage_tokens_of(self, target: Role) -> bool {
        match self {
            Role::Owner => true,
            Role::Admin => matches!(target, Role::Member | Role::Viewer),
            Role::Member | Role::Viewer => false,
        }
    }

    /// Whether a user of this role may hand out `other` (create a user with it).
    /// Only owners create owners; admins create admins and below.
    pub fn may_grant(self, other: Role) -> bool {
        self.has(Capability::Admin) && self <= other
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown {kind} `{value}`")]
pub struct ParseEnumError {
    pub kind: &'static str,
    pub value: String,
}

impl FromStr for Role {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Role::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| ParseEnumError {
                kind: "role",
                value: s.to_owned(),
            })
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who may read a document besides its team: `team` (everyone in the team) or `private`
/// (its owner only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Team,
    Private,
}

impl Visibility {
    pub fn as_str(self) -> &'static str {
        match self {
            Visibility::Team => "team",
            Visibility::Private => "private",
        }
    }
}

impl FromStr for Visibility {
    type Err = ParseEnumError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "team" => Ok(Visibility::Team),
            "private" => Ok(Visibility::Private),
            _ => Err(ParseEnumError {
                kind: "visibility",
                value: s.to_owned(),
            }),
        }
    }
}

/// Trims a user-supplied name and checks it is usable as a display name: 1..=200 characters,
/// no control characters.
pub fn clean_name(raw: &str, what: &'static str) -> Result<String, InvalidInput> {
    let name = raw.trim();
    if name.is_empty() {
        return Err(InvalidInput(format!("{what} must not be empty")));
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(InvalidInput(format!(
            "{what} is longer than {MAX_NAME_CHARS} characters"
        )));
    }
    if name.chars().any(char::is_control) {
        return Err(InvalidInput(format!("{what} contains control characters")));
    }
    Ok(name.to_owned())
}

/// The longest display name (corpus, user, token label, title), in characters.
pub const MAX_NAME_CHARS: usize = 200;
/// The longest search query, question or entity name an API takes, in characters.
pub const MAX_QUERY_CHARS: usize = 2_000;
/// The longest free-text description (a corpus's), in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 2_000;

/// `s` when it is at most `max` characters; else BAD_USER_INPUT naming the field.
pub fn bounded<'a>(s: &'a str, field: &str, max: usize) -> Result<&'a str, InvalidInput> {
    if s.chars().count() > max {
        Err(InvalidInput::new(
            field,
            format!("is longer than {max} characters"),
        ))
    } else {
        Ok(s)
    }
}

/// A rule of this module refused an input; the message is safe to show to the caller.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InvalidInput(pub String);

impl InvalidInput {
    /// "`field` `rule`", e.g. `InvalidInput::new("topK", "must be between 1 and 100")`.
    pub fn new(field: &str, rule: impl std::fmt::Display) -> InvalidInput {
        InvalidInput(format!("{field} {rule}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_capability_table() {
        assert!(Role::Owner.has(Capability::Admin));
        assert!(Role::Admin.has(Capability::Admin));
        assert!(!Role::Member.has(Capability::Admin));
        assert!(Role::Member.has(Capability::CorpusCreate));
        assert!(Role::Member.has(Capability::DocumentUpload));
        assert!(!Role::Viewer.has(Capability::CorpusCreate));
        assert!(!Role::Viewer.has(Capability::DocumentUpload));
        assert!(Role::Viewer.has(Capability::CorpusRead));
        assert!(Role::Viewer.has(Capability::Search));
        assert_eq!(Role::Viewer.capabilities().count(), 2);
        assert_eq!(Role::Owner.capabilities().count(), Capability::ALL.len());
    }

    #[test]
    fn only_owners_grant_owner() {
        assert!(Role::Owner.may_grant(Role::Owner));
        assert!(!Role::Admin.may_grant(Role::Owner));
        assert!(Role::Admin.may_grant(Role::Admin));
        assert!(Role::Admin.may_grant(Role::Viewer));
        assert!(!Role::Member.may_grant(Role::Viewer));
    }

    #[test]
    fn roles_round_trip() {
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>().ok(), Some(r));
        }
        assert!("root".parse::<Role>().is_err());
    }

    #[test]
    fn names_are_cleaned() {
        assert_eq!(
            clean_name("  Research ", "name").ok().as_deref(),
            Some("Research")
        );
        assert!(clean_name("   ", "name").is_err());
        assert!(clean_name("a\u{0}b", "name").is_err());
        assert!(clean_name(&"x".repeat(201), "name").is_err());
    }
}
