//! The readable-document predicate as SQL: the same rule as [`crate::auth::can_read_document`]
//! (a property test over both backends keeps them equal). Every query that returns documents,
//! chunks or knowledge-graph mentions appends it, so visibility is decided inside the query,
//! before any LIMIT.

use super::sql::Sql;
use crate::auth::Principal;

/// The principal's side of the rule.
pub struct Readable {
    team_id: i64,
    user_id: i64,
}

impl Readable {
    pub fn new(p: &Principal) -> Readable {
        Readable {
            team_id: p.team_id,
            user_id: p.user_id,
        }
    }

    /// Appends the predicate over a `documents` row aliased `d`.
    pub(crate) fn push_documents(&self, q: &mut Sql, d: &str) {
        q.push("((");
        q.push(d).push(".team_id = ").bind(self.team_id);
        q.push(" OR ").push(d);
        q.push(".corpus_id IN (SELECT sc.id FROM corpora sc WHERE sc.system)) AND (");
        q.push(d)
            .push(".visibility = 'team' OR ")
            .push(d)
            .push(".owner_id = ");
        q.bind(self.user_id);
        q.push("))");
    }
}
