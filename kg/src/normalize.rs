//! Name, predicate and type normalization: the keys the graph deduplicates on.
//!
//! * [`name_norm`] folds case, whitespace, punctuation at the ends and ONE trailing
//!   organization suffix, so "Acme Robotics", "ACME  robotics" and "Acme Robotics, Inc." share
//!   a key. Entities are deduplicated on `(type, name_norm)`; cross-type merging is not
//!   attempted.
//! * [`predicate_norm`] lower-snake-cases a predicate into `^[a-z][a-z0-9_]*$` with no doubled
//!   or trailing underscore (the database's check constraint), or `None`.
//! * [`type_norm`] lowercases, trims and joins words with `_`.

/// The shipped starter vocabulary of entity types. The vocabulary is open: extractors may use
/// other types, which are normalized with [`type_norm`] but never refused for being new.
pub const STARTER_TYPES: [&str; 6] = [
    "person",
    "organization",
    "product",
    "place",
    "event",
    "concept",
];

/// Organization suffixes [`name_norm`] strips (at most one, at the end of the name).
pub const ORG_SUFFIXES: [&str; 13] = [
    "inc",
    "ltd",
    "llc",
    "gmbh",
    "corp",
    "co",
    "plc",
    "ag",
    "sa",
    "bv",
    "limited",
    "incorporated",
    "corporation",
];

/// Punctuation trimmed from both ends of a name. `+`, `#`, `&`, `@`, `$`, `%` are kept: they
/// end real names ("C++", "C#", "AT&T").
fn is_end_punct(c: char) -> bool {
    matches!(
        c,
        '.' | ','
            | ';'
            | ':'
            | '!'
            | '?'
            | '"'
            | '\''
            | '`'
            | '('
            | ')'
            | '['
            | ']'
            | '{'
            | '}'
            | '<'
            | '>'
            | '«'
            | '»'
            | '“'
            | '”'
            | '„'
            | '‘'
            | '’'
            | '-'
            | '–'
            | '—'
            | '/'
            | '\\'
            | '*'
            | '_'
            | '|'
            | '~'
    ) || c.is_whitespace()
}

fn trim_ends(s: &str) -> &str {
    s.trim_matches(is_end_punct)
}

/// The normalized name entities are deduplicated on: lowercase, whitespace collapsed to one
/// space, punctuation trimmed at both ends, and one trailing organization suffix from
/// [`ORG_SUFFIXES`] removed (with an optional preceding comma and trailing dot). A name that is
/// only a suffix ("Inc.") keeps it. An empty result means the name has no usable content.
///
/// ```
/// use cairn_kg::normalize::name_norm;
/// assert_eq!(name_norm("Acme Robotics"), "acme robotics");
/// assert_eq!(name_norm("ACME  robotics"), "acme robotics");
/// assert_eq!(name_norm("Acme Robotics, Inc."), "acme robotics");
/// ```
pub fn name_norm(name: &str) -> String {
    let lower = name.to_lowercase();
    let collapsed = lower.split_whitespace().collect::<Vec<_>>().join(" ");
    let trimmed = trim_ends(&collapsed);
    let words: Vec<&str> = trimmed.split(' ').collect();
    if let Some((last, rest)) = words.split_last() {
        if !rest.is_empty() {
            let bare: String = last.chars().filter(|c| *c != '.').collect();
            if ORG_SUFFIXES.contains(&bare.as_str()) {
                let kept = rest.join(" ");
                let kept = kept.trim_end_matches(',');
                let kept = trim_ends(kept);
                if !kept.is_empty() {
                    return kept.to_string();
                }
            }
        }
    }
    trimmed.to_string()
}

/// The lower_snake_case form of a predicate: camelCase boundaries and every run of
/// non-alphanumeric characters become one `_`, ASCII only, leading digits and underscores
/// dropped, no trailing `_`. `None` when nothing is left. The result always matches
/// `^[a-z][a-z0-9_]*$` without `__` or a trailing `_`.
///
/// ```
/// use cairn_kg::normalize::predicate_norm;
/// assert_eq!(predicate_norm("Works At").as_deref(), Some("works_at"));
/// assert_eq!(predicate_norm("customer-of").as_deref(), Some("customer_of"));
/// assert_eq!(predicate_norm("  -- "), None);
/// ```
pub fn predicate_norm(predicate: &str) -> Option<String> {
    let mut out = String::with_capacity(predicate.len());
    let mut prev_lower_or_digit = false;
    for c in predicate.chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && prev_lower_or_digit {
                out.push('_');
            }
            prev_lower_or_digit = c.is_ascii_lowercase() || c.is_ascii_digit();
            out.push(c.to_ascii_lowercase());
        } else {
            prev_lower_or_digit = false;
            if !out.ends_with('_') {
                out.push('_');
            }
        }
    }
    let start = out.find(|c: char| c.is_ascii_lowercase())?;
    let s = out[start..].trim_end_matches('_');
    if s.is_empty() {
        None
    } else {
        Some(s.to_string())
    }
}

/// The normalized entity type: lowercase, trimmed, inner whitespace runs joined by `_`.
///
/// ```
/// use cairn_kg::normalize::type_norm;
/// assert_eq!(type_norm(" Organization "), "organization");
/// assert_eq!(type_norm("Research  Lab"), "research_lab");
/// ```
pub fn type_norm(t: &str) -> String {
    t.to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join("_")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn names_fold_case_whitespace_and_suffixes() {
        for n in [
            "Acme Robotics",
            "ACME  robotics",
            "Acme Robotics, Inc.",
            "Acme Robotics Inc",
            " acme\trobotics ",
            "\"Acme Robotics\"",
            "Acme Robotics Ltd.",
            "Acme Robotics GmbH",
            "Acme Robotics, LLC",
            "Acme Robotics Corporation",
            "Acme Robotics S.A.",
        ] {
            assert_eq!(name_norm(n), "acme robotics", "{n:?}");
        }
    }

    #[test]
    fn only_one_suffix_is_stripped_and_never_the_whole_name() {
        assert_eq!(name_norm("Acme Co Ltd"), "acme co");
        assert_eq!(name_norm("Inc."), "inc");
        assert_eq!(name_norm("Co"), "co");
        // Suffix words inside a name are kept.
        assert_eq!(name_norm("Inc Magazine Group"), "inc magazine group");
    }

    #[test]
    fn name_punctuation_rules() {
        assert_eq!(name_norm("C++"), "c++");
        assert_eq!(name_norm("AT&T"), "at&t");
        assert_eq!(name_norm("(Globex)"), "globex");
        assert_eq!(name_norm("  ...  "), "");
        assert_eq!(name_norm("Zürich"), "zürich");
        assert_eq!(name_norm("Procter & Gamble Co."), "procter & gamble");
    }

    #[test]
    fn predicates_are_lower_snake_case() {
        let re = regex::Regex::new("^[a-z][a-z0-9_]*$").ok();
        let cases = [
            ("Works At", Some("works_at")),
            ("customer-of", Some("customer_of")),
            ("worksAt", Some("works_at")),
            ("PART_OF", Some("part_of")),
            ("  located   in ", Some("located_in")),
            ("__founded__by__", Some("founded_by")),
            ("2nd supplier of", Some("nd_supplier_of")),
            ("acquired!", Some("acquired")),
            ("owns", Some("owns")),
            ("v2 of", Some("v2_of")),
            ("", None),
            ("  ", None),
            ("--", None),
            ("123", None),
            ("über", Some("ber")),
        ];
        for (input, want) in cases {
            let got = predicate_norm(input);
            assert_eq!(got.as_deref(), want, "{input:?}");
            if let (Some(g), Some(re)) = (&got, &re) {
                assert!(re.is_match(g), "{g}");
                assert!(!g.contains("__") && !g.ends_with('_'), "{g}");
            }
        }
    }

    #[test]
    fn types_are_lowercase_and_underscored() {
        assert_eq!(type_norm("Person"), "person");
        assert_eq!(type_norm("  research  lab "), "research_lab");
        assert_eq!(type_norm("   "), "");
        for t in STARTER_TYPES {
            assert_eq!(type_norm(t), t);
        }
    }
}
