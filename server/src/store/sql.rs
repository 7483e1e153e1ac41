//! A tiny SQL text builder for the hand-written queries: it numbers placeholders the way the
//! backend wants (`$1…` on PostgreSQL, `?` on SQLite) so one query text serves both.

use sea_orm::{DatabaseBackend, Statement, Value};

pub(crate) struct Sql {
    backend: DatabaseBackend,
    text: String,
    values: Vec<Value>,
}

impl Sql {
    pub(crate) fn new(backend: DatabaseBackend) -> Sql {
        Sql {
            backend,
            text: String::with_capacity(256),
            values: Vec::new(),
        }
    }

    pub(crate) fn push(&mut self, s: &str) -> &mut Self {
        self.text.push_str(s);
        self
    }

    /// Appends a placeholder bound to `v`.
    pub(crate) fn bind(&mut self, v: impl Into<Value>) -> &mut Self {
        self.values.push(v.into());
        match self.backend {
            DatabaseBackend::Postgres => {
                self.text.push('$');
                self.text.push_str(&self.values.len().to_string());
            }
            _ => self.text.push('?'),
        }
        self
    }

    /// Appends a row count (`LIMIT`, `OFFSET`) as a literal, not a placeholder: SQLite treats
    /// a bound `LIMIT` as part of the query plan and prepares the statement again on every
    /// execution, while a literal keeps one cached statement per count. An integer cannot
    /// inject anything.
    pub(crate) fn count(&mut self, n: u64) -> &mut Self {
        self.text.push_str(&n.to_string());
        self
    }

    /// Appends `(p1, p2, …)`; callers never pass an empty list (checked by them first).
    pub(crate) fn push_list<V: Into<Value>>(
        &mut self,
        items: impl IntoIterator<Item = V>,
    ) -> &mut Self {
        self.text.push('(');
        for (i, v) in items.into_iter().enumerate() {
            if i > 0 {
                self.text.push_str(", ");
            }
            self.bind(v);
        }
        self.text.push(')');
        self
    }

    pub(crate) fn build(self) -> Statement {
        Statement::from_sql_and_values(self.backend, self.text, self.values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_per_backend() {
        let mut pg = Sql::new(DatabaseBackend::Postgres);
        pg.push("a = ")
            .bind(1i64)
            .push(" AND b IN ")
            .push_list([2i64, 3]);
        assert_eq!(pg.text, "a = $1 AND b IN ($2, $3)");
        let mut lite = Sql::new(DatabaseBackend::Sqlite);
        lite.push("a = ")
            .bind(1i64)
            .push(" AND b IN ")
            .push_list([2i64, 3]);
        assert_eq!(lite.text, "a = ? AND b IN (?, ?)");
        assert_eq!(lite.values.len(), 3);
    }

    #[test]
    fn counts_are_literals() {
        let mut lite = Sql::new(DatabaseBackend::Sqlite);
        lite.push("x = ").bind(1i64).push(" LIMIT ").count(300);
        assert_eq!(lite.text, "x = ? LIMIT 300");
        assert_eq!(lite.values.len(), 1);
    }
}
