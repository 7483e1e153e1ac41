//! The detectors: where in a text the e-mail addresses, IBANs, phone numbers and configured
//! names are, and the normalized key of each (the identity behind "same value → same
//! placeholder").

use std::collections::BTreeMap;

use regex::{Regex, RegexBuilder};

use super::iban;
use super::PiiKind;

/// One detected value: its byte range in the text and its normalized key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub start: usize,
    pub end: usize,
    pub kind: PiiKind,
    pub key: String,
}

/// Compiled once per [`super::Anonymizer`] and shared (behind an `Arc`) with every map it makes.
#[derive(Debug)]
pub(crate) struct Detectors {
    email: Regex,
    iban: Regex,
    phone: Regex,
    /// `None` when no names are configured.
    names: Option<LiteralSet>,
    pub(crate) placeholder: Regex,
}

/// The regex size limit for the name list and the literal sets (the default 10 MiB is too
/// small for thousands of case-insensitive names).
const SIZE_LIMIT: usize = 256 * 1024 * 1024;

const EMAIL: &str =
    r"[\p{L}\p{N}._%+\-]+@(?:[\p{L}\p{N}](?:[\p{L}\p{N}\-]*[\p{L}\p{N}])?\.)+\p{L}{2,}";
/// ASCII word boundaries: an IBAN is ASCII, and the Unicode `\b` would keep the fast engines
/// off non-ASCII text.
const IBAN: &str =
    r"(?-u:\b)[A-Za-z]{2}[0-9]{2}(?:[ ]?[A-Za-z0-9]{4}){2,8}(?:[ ]?[A-Za-z0-9]{1,3})?(?-u:\b)";
const PHONE: &str = r"\+?\(?[0-9](?:[0-9]|[ .\-/]\(?[0-9]|\)[ .\-]?[0-9]|\([0-9])*\)?";
/// `[NAME_1]`, `\[NAME_1\]` (Markdown-escaped), `[ NAME_1 ]`, or a bare `NAME_1`.
const PLACEHOLDER: &str = r"\\?\[\s*(EMAIL|PHONE|IBAN|NAME)_([0-9]{1,9})\s*\\?\]|\b(EMAIL|PHONE|IBAN|NAME)_([0-9]{1,9})\b";

impl Detectors {
    /// `names` must already be normalized by [`clean_names`].
    pub(crate) fn new(names: &[String]) -> Result<Self, regex::Error> {
        let names = if names.is_empty() {
            None
        } else {
            Some(literal_set(names)?)
        };
        Ok(Self {
            email: Regex::new(EMAIL)?,
            iban: Regex::new(IBAN)?,
            phone: Regex::new(PHONE)?,
            names,
            placeholder: Regex::new(PLACEHOLDER)?,
        })
    }

    /// Every detected value, sorted by position and non-overlapping. When two overlap, the
    /// earlier kind in this order wins: e-mail, IBAN, phone, name.
    pub(crate) fn find(&self, text: &str) -> Vec<Found> {
        let mut found = Taken::default();
        let mut batch = Vec::new();
        self.emails(text, &mut batch);
        found.extend(batch.drain(..));
        self.ibans(text, &mut batch);
        found.extend(batch.drain(..));
        self.phones(text, &mut batch);
        found.extend(batch.drain(..));
        if let Some(names) = &self.names {
            batch.extend(
                find_literals(names, text)
                    .into_iter()
                    .map(|(start, end)| Found {
                        start,
                        end,
                        kind: PiiKind::Name,
                        key: name_key(&text[start..end]),
                    }),
            );
            found.extend(batch.drain(..));
        }
        found.into_vec()
    }

    fn emails(&self, text: &str, found: &mut Vec<Found>) {
        for m in self.email.find_iter(text) {
            let s = m.as_str();
            let trimmed = s.trim_start_matches('.');
            let start = m.start() + (s.len() - trimmed.len());
            if trimmed.starts_with('@') {
                continue;
            }
            found.push(Found {
                start,
                end: m.end(),
                kind: PiiKind::Email,
                key: trimmed.to_lowercase(),
            });
        }
    }

    fn ibans(&self, text: &str, found: &mut Vec<Found>) {
        for m in self.iban.find_iter(text) {
            // Compact characters with the byte offset just past each one.
            let compact: Vec<(char, usize)> = m
                .as_str()
                .char_indices()
                .filter(|(_, c)| *c != ' ')
                .map(|(i, c)| (c.to_ascii_uppercase(), m.start() + i + c.len_utf8()))
                .collect();
            let country: String = compact.iter().take(2).map(|(c, _)| *c).collect();
            let Some(len) = iban::country_length(&country) else {
                continue;
            };
            let Some(&(_, end)) = len.checked_sub(1).and_then(|i| compact.get(i)) else {
                continue;
            };
            // A longer match may be cut only at a group boundary (trailing words matched as
            // groups); never inside one.
            if compact.len() > len && !text[end..].starts_with(' ') {
                continue;
            }
            let key: String = compact.iter().take(len).map(|(c, _)| *c).collect();
            if iban::is_valid(&key) {
                found.push(Found {
                    start: m.start(),
                    end,
                    kind: PiiKind::Iban,
                    key,
                });
            }
        }
    }

    fn phones(&self, text: &str, found: &mut Vec<Found>) {
        for m in self.phone.find_iter(text) {
            for (start, end, key) in phone_spans(text, m.start(), m.end()) {
                found.push(Found {
                    start,
                    end,
                    kind: PiiKind::Phone,
                    key,
                });
            }
        }
    }
}

/// Non-overlapping findings by start offset.
#[derive(Default)]
pub(crate) struct Taken(BTreeMap<usize, Found>);

impl Taken {
    /// The findings in order.
    pub(crate) fn into_vec(self) -> Vec<Found> {
        self.0.into_values().collect()
    }

    /// Adds each finding that overlaps nothing already taken.
    pub(crate) fn extend(&mut self, found: impl IntoIterator<Item = Found>) {
        for f in found {
            if f.start >= f.end {
                continue;
            }
            // Taken ranges never overlap, so only the last one starting before `f.end` can.
            let clash = self
                .0
                .range(..f.end)
                .next_back()
                .is_some_and(|(_, g)| g.end > f.start);
            if !clash {
                self.0.insert(f.start, f);
            }
        }
    }
}

/// A letter, a number or `_` (`char::is_alphanumeric`): the boundary classes of
/// [`literal_set`] are exactly the other characters.
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The configured names, cleaned: surrounding punctuation and whitespace trimmed, names under
/// two characters dropped (they would match everywhere), case-insensitive duplicates removed,
/// longest first.
pub(crate) fn clean_names(names: Vec<String>) -> Vec<String> {
    let mut cleaned: Vec<String> = Vec::new();
    let mut keys: Vec<String> = Vec::new();
    for name in names {
        let name = name.trim_matches(|c: char| !is_word_char(c));
        let collapsed = name.split_whitespace().collect::<Vec<_>>().join(" ");
        if collapsed.chars().count() < 2 {
            continue;
        }
        let key = name_key(&collapsed);
        if !keys.contains(&key) {
            keys.push(key);
            cleaned.push(collapsed);
        }
    }
    cleaned.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
    cleaned
}

/// The identity of a name: lower case, whitespace collapsed, typographic apostrophes plain.
pub(crate) fn name_key(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('’', "'")
        .to_lowercase()
}

/// A regex fragment matching `literal` with any run of whitespace where it has whitespace and
/// either apostrophe where it has one.
pub(crate) fn flexible_fragment(literal: &str) -> String {
    literal
        .split_whitespace()
        .map(|word| {
            word.split(['\'', '’'])
                .map(regex::escape)
                .collect::<Vec<_>>()
                .join("['’]")
        })
        .collect::<Vec<_>>()
        .join(r"\s+")
}

/// One case-insensitive regex over several literals (each as a [`flexible_fragment`]), with a
/// word boundary on each side that begins or ends with a word character. The boundary is
/// matched as a character (not a `\b` assertion) so the fast DFA engines apply;
/// [`find_literals`] resumes right after each literal.
///
/// Literals sharing the same boundaries share one capture group and one copy of the (large,
/// Unicode) boundary classes, so thousands of names stay small. Within a group the
/// alternatives keep the given order: pass them longest first, so that "Jean Dupont" wins over
/// "Jean" (leftmost-first matching falls back to "Jean" only where "Jean Dupont" does not fit).
pub(crate) fn literal_set(literals: &[String]) -> Result<LiteralSet, regex::Error> {
    let mut buckets: [Vec<String>; 4] = Default::default();
    for literal in literals {
        let lead = literal.chars().next().is_some_and(is_word_char);
        let trail = literal.chars().next_back().is_some_and(is_word_char);
        let bucket = match (lead, trail) {
            (true, true) => 0,
            (true, false) => 1,
            (false, true) => 2,
            (false, false) => 3,
        };
        buckets[bucket].push(flexible_fragment(literal));
    }
    let alternatives: Vec<String> = buckets
        .iter()
        .enumerate()
        .filter(|(_, fragments)| !fragments.is_empty())
        .map(|(bucket, fragments)| {
            let lead = if bucket < 2 {
                "(?:^|[^\\p{Alphabetic}\\p{N}_])"
            } else {
                ""
            };
            let trail = if bucket % 2 == 0 {
                "(?:[^\\p{Alphabetic}\\p{N}_]|$)"
            } else {
                ""
            };
            format!("{lead}({}){trail}", fragments.join("|"))
        })
        .collect();
    let re = RegexBuilder::new(&alternatives.join("|"))
        .case_insensitive(true)
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT)
        .build()?;
    Ok(LiteralSet {
        re,
        word_bounded: buckets[1..].iter().all(Vec::is_empty),
    })
}

/// A compiled [`literal_set`].
#[derive(Debug, Clone)]
pub(crate) struct LiteralSet {
    re: Regex,
    /// Every literal begins and ends with a word character, so a match is the literal with at
    /// most one boundary character on each side, and no capture search is needed.
    word_bounded: bool,
}

/// The byte ranges of the literals that `set` (built by [`literal_set`]) finds, in order.
pub(crate) fn find_literals(set: &LiteralSet, text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos <= text.len() {
        let Some(m) = set.re.find_at(text, pos) else {
            break;
        };
        let (start, end) = if set.word_bounded {
            // Strip the boundary characters: the literal itself starts and ends with a word
            // character. (Much cheaper than a capture search over thousands of names.)
            let mut start = m.start();
            let mut end = m.end();
            if let Some(c) = text[start..end]
                .chars()
                .next()
                .filter(|c| !is_word_char(*c))
            {
                start += c.len_utf8();
            }
            if let Some(c) = text[start..end]
                .chars()
                .next_back()
                .filter(|c| !is_word_char(*c))
            {
                end -= c.len_utf8();
            }
            (start, end)
        } else {
            let literal = set
                .re
                .captures_at(text, m.start())
                .and_then(|caps| caps.iter().skip(1).flatten().next())
                .map(|g| (g.start(), g.end()));
            match literal {
                Some(span) => span,
                None => break,
            }
        };
        out.push((start, end));
        // Resume at the end of the literal itself: the boundary character after it may be the
        // boundary before the next one.
        pos = if end > pos { end } else { m.end().max(pos + 1) };
    }
    out
}

/// One run of digits inside a phone candidate.
#[derive(Debug)]
struct Group<'a> {
    /// Byte range in the text, including the surrounding parentheses of a parenthesized group
    /// and the `+` before the first group.
    start: usize,
    end: usize,
    digits: &'a str,
    paren: bool,
}

/// The phone numbers inside one candidate match `[start, end)` of the phone regex: its
/// longest valid runs of digit groups, cut only at spaces (so that a phone next to a year is
/// found, and "2024-01-15" never yields a phone inside it).
fn phone_spans(text: &str, start: usize, end: usize) -> Vec<(usize, usize, String)> {
    if text[start..end].bytes().filter(u8::is_ascii_digit).count() < 7 {
        return Vec::new();
    }
    let before = text[..start].chars().next_back();
    if before.is_some_and(|c| is_word_char(c) || c == '+' || c == '@') {
        return Vec::new();
    }
    let after = text[end..].chars().next();
    if after.is_some_and(is_word_char) {
        return Vec::new();
    }
    let candidate = &text[start..end];
    let plus = candidate.starts_with('+');
    let bytes = candidate.as_bytes();
    let mut groups: Vec<Group<'_>> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if !bytes[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let g_start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        let paren = g_start > 0 && bytes[g_start - 1] == b'(' && bytes.get(i) == Some(&b')');
        let (ext_start, ext_end) = if paren {
            (g_start - 1, i + 1)
        } else if groups.is_empty() && plus && g_start == 1 {
            (0, i)
        } else {
            (g_start, i)
        };
        groups.push(Group {
            start: start + ext_start,
            end: start + ext_end,
            digits: &candidate[g_start..i],
            paren,
        });
    }
    // The separator between group k and k+1, as text.
    let seps: Vec<&str> = groups
        .windows(2)
        .map(|w| &text[w[0].end..w[1].start])
        .collect();

    let mut out = Vec::new();
    let mut i = 0;
    while i < groups.len() {
        // A run may start inside the candidate only after a space.
        if i > 0 && seps[i - 1] != " " {
            i += 1;
            continue;
        }
        let mut taken = None;
        for j in (i + 1..=groups.len()).rev() {
            // ... and end inside it only before a space.
            if j < groups.len() && seps[j - 1] != " " {
                continue;
            }
            if let Some(key) = classify(&groups[i..j], &seps[i..j - 1], plus && i == 0) {
                taken = Some((j, key));
                break;
            }
        }
        match taken {
            Some((j, key)) => {
                out.push((groups[i].start, groups[j - 1].end, key));
                i = j;
            }
            None => i += 1,
        }
    }
    out
}

/// Whether these digit groups (and the separators between them) are a phone number, and its
/// key: `+` and the digits for international numbers (the `(0)` trunk prefix dropped, `00`
/// read as `+`), the digits for national ones.
fn classify(groups: &[Group<'_>], seps: &[&str], plus: bool) -> Option<String> {
    // Separators: one of space . - / , or nothing next to a parenthesized group.
    if !seps
        .iter()
        .all(|s| matches!(*s, " " | "." | "-" | "/" | ""))
    {
        return None;
    }
    for (k, s) in seps.iter().enumerate() {
        if s.is_empty() && !groups[k].paren && !groups[k + 1].paren {
            return None;
        }
    }
    let digits: String = groups.iter().map(|g| g.digits).collect();
    let total = digits.len();
    if plus {
        if groups[0].paren {
            return None;
        }
        let national: String = groups
            .iter()
            .filter(|g| !(g.paren && g.digits == "0"))
            .map(|g| g.digits)
            .collect();
        return (7..=15)
            .contains(&national.len())
            .then(|| format!("+{national}"));
    }
    if let Some(rest) = digits.strip_prefix("00") {
        if rest.starts_with('0') || groups[0].paren {
            return None;
        }
        return (7..=15).contains(&rest.len()).then(|| format!("+{rest}"));
    }
    let lens: Vec<usize> = groups.iter().map(|g| g.digits.len()).collect();
    let same_seps = seps.windows(2).all(|w| w[0] == w[1]);
    // Dates: 2024-01-15, 15.01.2024, 01/15/2024, 15 01 2024.
    if lens.len() == 3
        && same_seps
        && !seps[0].is_empty()
        && ((lens[0] == 4 && lens[1] <= 2 && lens[2] <= 2)
            || (lens[0] <= 2 && lens[1] <= 2 && (lens[2] == 4 || lens[2] == 2)))
    {
        return None;
    }
    // IPv4 addresses.
    if lens.len() == 4 && seps.iter().all(|s| *s == ".") && lens.iter().all(|l| *l <= 3) {
        return None;
    }
    if groups[1..].iter().any(|g| g.paren) {
        return None;
    }
    // (555) 123-4567, (030) 1234567: a parenthesized area code.
    if groups[0].paren {
        let area = lens[0];
        return ((2..=5).contains(&area) && groups.len() >= 2 && (7..=12).contains(&total))
            .then_some(digits);
    }
    let nanp_sep = |s: &&str| matches!(*s, " " | "-" | ".");
    // 555-123-4567, 555.123.4567, 555 123 4567, 1-800-555-1234, 555-1234.
    if (lens == [3, 3, 4] && same_seps && seps.iter().all(nanp_sep))
        || (lens == [1, 3, 3, 4]
            && digits.starts_with('1')
            && same_seps
            && seps.iter().all(nanp_sep))
        || (lens == [3, 4] && seps == ["-"])
    {
        return Some(digits);
    }
    // National numbers with a trunk 0: 06 12 34 56 78, 020 7946 0958, 030/1234567, 0612345678.
    if digits.starts_with('0')
        && lens.iter().all(|l| *l >= 2)
        && (9..=12).contains(&total)
        && !(lens.len() == 2 && seps[0] == ".")
    {
        return Some(digits);
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn det() -> Detectors {
        Detectors::new(&clean_names(vec![
            "Jean Dupont".into(),
            "Jean".into(),
            "Zoé O'Neil".into(),
        ]))
        .unwrap()
    }

    fn kinds(text: &str) -> Vec<(PiiKind, String)> {
        det()
            .find(text)
            .into_iter()
            .map(|f| (f.kind, text[f.start..f.end].to_owned()))
            .collect()
    }

    fn phones(text: &str) -> Vec<String> {
        kinds(text)
            .into_iter()
            .filter(|(k, _)| *k == PiiKind::Phone)
            .map(|(_, s)| s)
            .collect()
    }

    #[test]
    fn phone_positives() {
        for (text, want) in [
            ("call +33 6 12 34 56 78 now", "+33 6 12 34 56 78"),
            ("call +33 (0)6 12 34 56 78.", "+33 (0)6 12 34 56 78"),
            ("call +33612345678", "+33612345678"),
            ("US: +1 (555) 123-4567", "+1 (555) 123-4567"),
            ("+44 20 7946 0958", "+44 20 7946 0958"),
            ("+49 30 123456", "+49 30 123456"),
            ("0044 20 7946 0958", "0044 20 7946 0958"),
            ("tel 06 12 34 56 78", "06 12 34 56 78"),
            ("tel 06.12.34.56.78", "06.12.34.56.78"),
            ("tel 06-12-34-56-78", "06-12-34-56-78"),
            ("tel 0612345678", "0612345678"),
            ("(555) 123-4567", "(555) 123-4567"),
            ("555-123-4567", "555-123-4567"),
            ("555.123.4567", "555.123.4567"),
            ("1-800-555-1234", "1-800-555-1234"),
            ("call 555-1234!", "555-1234"),
            ("020 7946 0958", "020 7946 0958"),
            ("030/1234567", "030/1234567"),
            ("(030) 1234567", "(030) 1234567"),
            ("044 668 18 00", "044 668 18 00"),
        ] {
            assert_eq!(phones(text), vec![want.to_owned()], "{text}");
        }
    }

    #[test]
    fn phone_negatives() {
        for text in [
            "in 2024 we grew",
            "1999 2000 2001 2002",
            "2019-2024",
            "on 2024-01-15 at noon",
            "on 15.01.2024",
            "on 05.01.2024",
            "on 01/15/2024",
            "on 15 01 2024",
            "12 apples and 3 pears, 45 plums",
            "1 2 3 4 5 6 7 8 9",
            "pi is 3.14159265",
            "0.1234567 percent",
            "1,234,567.89 EUR",
            "1.234.567 EUR",
            "version 1.2.3 and 10.0.19045",
            "host 192.168.100.200",
            "ISBN 978-3-16-148410-0",
            "ISBN 0-306-40615-2",
            "card 4111 1111 1111 1111",
            "order A1234567890",
            "ticket #1234567",
            "id 1234567890",
            "unix 1700000000",
            "price 12345678",
            "5+1234567",
            "hours 9.00-17.00",
            "room 0012 3456",
        ] {
            assert_eq!(phones(text), Vec::<String>::new(), "{text}");
        }
    }

    #[test]
    fn phone_next_to_other_numbers() {
        assert_eq!(
            phones("call 06 12 34 56 78 2024 budget"),
            vec!["06 12 34 56 78".to_owned()]
        );
        assert_eq!(
            phones("in 2024 06 12 34 56 78"),
            vec!["06 12 34 56 78".to_owned()]
        );
        assert_eq!(
            phones("06 12 34 56 78, 07 11 22 33 44"),
            vec!["06 12 34 56 78".to_owned(), "07 11 22 33 44".to_owned()]
        );
        assert_eq!(
            phones("on 2024-01-15 0612345678"),
            vec!["0612345678".to_owned()]
        );
    }

    #[test]
    fn phone_keys_normalize_formatting() {
        let d = det();
        let keys: Vec<String> = d
            .find("+33 6 12 34 56 78 / +33 (0)6 12 34 56 78 / 0033 612345678 / 06 12 34 56 78")
            .into_iter()
            .map(|f| f.key)
            .collect();
        assert_eq!(
            keys,
            ["+33612345678", "+33612345678", "+33612345678", "0612345678"]
        );
    }

    #[test]
    fn emails() {
        let found = kinds("Write to Jean.Dupont+cairn@Example.co.uk, or ...x@y.fr.");
        assert_eq!(
            found,
            vec![
                (PiiKind::Email, "Jean.Dupont+cairn@Example.co.uk".to_owned()),
                (PiiKind::Email, "x@y.fr".to_owned()),
            ]
        );
        assert!(kinds("user@localhost and @handle and a@b").is_empty());
        assert_eq!(
            kinds("élodie@exemple.fr")[0],
            (PiiKind::Email, "élodie@exemple.fr".to_owned())
        );
        let d = det();
        assert_eq!(d.find("A@B.COM")[0].key, "a@b.com");
    }

    #[test]
    fn ibans() {
        for (text, want) in [
            (
                "IBAN DE89 3704 0044 0532 0130 00 please",
                "DE89 3704 0044 0532 0130 00",
            ),
            ("iban: DE89370400440532013000.", "DE89370400440532013000"),
            (
                "FR14 2004 1010 0505 0001 3M02 606 and more",
                "FR14 2004 1010 0505 0001 3M02 606",
            ),
            ("BE68 5390 0754 7034 WITH words", "BE68 5390 0754 7034"),
            (
                "lower gb29 nwbk 6016 1331 9268 19",
                "gb29 nwbk 6016 1331 9268 19",
            ),
            ("NO93 8601 1117 947", "NO93 8601 1117 947"),
        ] {
            let found = kinds(text);
            assert_eq!(found, vec![(PiiKind::Iban, want.to_owned())], "{text}");
        }
        let d = det();
        assert_eq!(
            d.find("gb29 nwbk 6016 1331 9268 19")[0].key,
            "GB29NWBK60161331926819"
        );
    }

    #[test]
    fn iban_negatives() {
        for text in [
            "DE89 3704 0044 0532 0130 01", // bad check digits
            "DE89370400440532013000123",   // too long, no group boundary
            "XX89 3704 0044 0532 0130 00", // no such country
            "AB12 CDEF GHIJ KLMN",         // letters and digits, not an IBAN
            "DE89 3704 0044",              // too short
        ] {
            assert!(
                kinds(text).iter().all(|(k, _)| *k != PiiKind::Iban),
                "{text}: {:?}",
                kinds(text)
            );
        }
    }

    #[test]
    fn names_whole_words_case_insensitive_longest_first() {
        assert_eq!(
            kinds("JEAN DUPONT met jean, not Jeanne nor Jean-Luc's cat"),
            vec![
                (PiiKind::Name, "JEAN DUPONT".to_owned()),
                (PiiKind::Name, "jean".to_owned()),
                (PiiKind::Name, "Jean".to_owned()),
            ]
        );
        assert_eq!(
            kinds("Jean\n  Dupont, Jean Jean"),
            vec![
                (PiiKind::Name, "Jean\n  Dupont".to_owned()),
                (PiiKind::Name, "Jean".to_owned()),
                (PiiKind::Name, "Jean".to_owned()),
            ]
        );
        assert_eq!(
            kinds("zoé o’neil wrote"),
            vec![(PiiKind::Name, "zoé o’neil".to_owned())]
        );
        assert!(kinds("Jeans, ajean, Jean_x, Zoéa").is_empty());
        // Boundaries agree with char::is_alphanumeric, superscripts included.
        assert!(kinds("Jean² ²Jean x²Jean").is_empty());
        assert_eq!(
            kinds("(Jean) «Jean»"),
            vec![
                (PiiKind::Name, "Jean".to_owned()),
                (PiiKind::Name, "Jean".to_owned()),
            ]
        );
        let d = det();
        let keys: Vec<String> = d.find("Jean  DUPONT").into_iter().map(|f| f.key).collect();
        assert_eq!(keys, ["jean dupont"]);
    }

    #[test]
    fn overlaps_prefer_email_then_iban_then_phone() {
        assert_eq!(
            kinds("jean@dupont.fr"),
            vec![(PiiKind::Email, "jean@dupont.fr".to_owned())]
        );
        assert_eq!(
            kinds("0612345678@sms.example.com"),
            vec![(PiiKind::Email, "0612345678@sms.example.com".to_owned())]
        );
    }

    #[test]
    fn clean_names_rules() {
        assert_eq!(
            clean_names(vec![
                " Jean ".into(),
                "jean".into(),
                "X".into(),
                "".into(),
                "Dr. Jean  Dupont.".into(),
                "(Al)".into(),
            ]),
            vec!["Dr. Jean Dupont", "Jean", "Al"]
        );
    }

    #[test]
    fn literal_set_resumes_after_each_match() {
        let re = literal_set(&["ann".to_owned()]).unwrap();
        assert_eq!(
            find_literals(&re, "Ann ann,ANN"),
            vec![(0, 3), (4, 7), (8, 11)]
        );
        let re = literal_set(&["+33 6".to_owned()]).unwrap();
        assert_eq!(find_literals(&re, "a+33 6 b"), vec![(1, 6)]);
        assert!(find_literals(&re, "a+33 6b").is_empty());
        let re = literal_set(&["Jo Ann".to_owned(), "Jo".to_owned(), "+1 2".to_owned()]).unwrap();
        assert_eq!(
            find_literals(&re, "Jo Anna, jo ann, +1 2"),
            vec![(0, 2), (9, 15), (17, 21)]
        );
    }
}
