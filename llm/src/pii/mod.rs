//! PII anonymization before text leaves for an LLM, and restoration after.
//!
//! [`Anonymizer::anonymize`] replaces e-mail addresses, phone numbers, IBANs and configured
//! person names by placeholders (`[EMAIL_1]`, `[PHONE_1]`, `[IBAN_1]`, `[NAME_1]`) and returns
//! the [`PiiMap`] that undoes it. [`PiiMap::apply`] hides the same values in other text sent
//! along (retrieved context); [`PiiMap::restore`] puts the originals back into the reply.
//!
//! # Rules
//!
//! - **Same value, same placeholder.** Values are compared by a normalized key: e-mails case-
//!   insensitively; phone numbers by their digits (`+33 6 12 34 56 78`, `+33 (0)6 12 34 56 78`
//!   and `0033 612345678` are one number; a national `06 12 34 56 78` is another, as no
//!   country is guessed); IBANs without spaces, upper case; names case-insensitively with
//!   whitespace collapsed. Restoring gives back the first form seen.
//! - **Numbering** follows the order of appearance, per kind, and continues across
//!   [`Anonymizer::anonymize_into`] calls on the same map.
//! - **Overlaps**: e-mail beats IBAN beats phone beats name (`jean.dupont@x.fr` is one e-mail).
//! - **Phones** (a bias for precision on numbers that are clearly not phones, since every
//!   false positive blinds the model): `+` or `00` international numbers of 7–15 digits in
//!   any spacing; national numbers with a trunk `0` of 9–12 digits in groups of two or more;
//!   North-American shapes (`555-123-4567`, `(555) 123-4567`, `555-1234`); a parenthesized
//!   area code. Never: dates (`2024-01-15`, `15.01.2024`), years, IPv4 addresses, decimals,
//!   thousands, version numbers, ISBNs, card-like runs of 4-digit groups, bare numbers that do
//!   not start with 0. Numbers glued to letters (`A1234567890`) are identifiers, not phones.
//! - **IBANs**: a registry country code with its exact length, spaces only between groups of
//!   four, upper or lower case, and the ISO 7064 MOD 97-10 check.
//! - **Names**: the configured list, trimmed of surrounding punctuation, those under two
//!   characters dropped; matched case-insensitively, as whole words (a hyphen or apostrophe
//!   ends a word: "Jean" is found in "Jean-Luc"), any whitespace between words, `'` and `’`
//!   alike, longest first ("Jean Dupont" before "Jean").
//! - **Restoring tolerates** what models do to placeholders: `[NAME_1]`, `[ NAME_1 ]`,
//!   Markdown-escaped `\[NAME_1\]`, and the bare `NAME_1` (brackets dropped) as a whole word.
//!   Placeholders the map does not know (`[NAME_9]`, invented by the model) are left as they
//!   are. Restore string values after parsing a JSON reply, not the raw JSON (an original
//!   could need escaping).
//!
//! Nothing here logs, and `Debug` of a [`PiiMap`] prints no originals.

mod detect;
mod iban;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::error::LlmError;
use detect::Detectors;

/// What a placeholder stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PiiKind {
    Email,
    Phone,
    Iban,
    Name,
}

impl PiiKind {
    /// The placeholder label: `EMAIL`, `PHONE`, `IBAN`, `NAME`.
    pub fn label(self) -> &'static str {
        match self {
            PiiKind::Email => "EMAIL",
            PiiKind::Phone => "PHONE",
            PiiKind::Iban => "IBAN",
            PiiKind::Name => "NAME",
        }
    }

    fn from_label(label: &str) -> Option<Self> {
        match label {
            "EMAIL" => Some(PiiKind::Email),
            "PHONE" => Some(PiiKind::Phone),
            "IBAN" => Some(PiiKind::Iban),
            "NAME" => Some(PiiKind::Name),
            _ => None,
        }
    }

    fn index(self) -> usize {
        match self {
            PiiKind::Email => 0,
            PiiKind::Phone => 1,
            PiiKind::Iban => 2,
            PiiKind::Name => 3,
        }
    }
}

/// Finds PII in text and replaces it by placeholders. Build it once (it compiles its
/// detectors) and share it: it is cheap to clone, `Send` and `Sync`.
#[derive(Clone)]
pub struct Anonymizer {
    det: Arc<Detectors>,
    names: usize,
}

impl fmt::Debug for Anonymizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Anonymizer")
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl Anonymizer {
    /// An anonymizer for e-mails, phones, IBANs and the given person names (see the module
    /// docs for how names are cleaned and matched). Fails with [`LlmError::Config`] only if
    /// the name list is too large to compile.
    pub fn new(names: Vec<String>) -> Result<Anonymizer, LlmError> {
        let names = detect::clean_names(names);
        let det = Detectors::new(&names)
            .map_err(|e| LlmError::Config(format!("cannot compile the PII detectors: {e}")))?;
        Ok(Anonymizer {
            det: Arc::new(det),
            names: names.len(),
        })
    }

    /// Replaces every detected value by its placeholder; the map undoes it.
    pub fn anonymize(&self, text: &str) -> (String, PiiMap) {
        let mut map = self.new_map();
        let out = self.anonymize_into(text, &mut map);
        (out, map)
    }

    /// Like [`anonymize`](Self::anonymize), adding to an existing map: values it already
    /// knows keep their placeholders, new ones get the next numbers. Use it for context that
    /// may hold PII of its own, so the question and its context share one numbering.
    pub fn anonymize_into(&self, text: &str, map: &mut PiiMap) -> String {
        let found = self.det.find(text);
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for f in found {
            let index = map.intern(f.kind, f.key, &text[f.start..f.end]);
            out.push_str(&text[last..f.start]);
            out.push_str(&map.entries[index].placeholder);
            last = f.end;
        }
        out.push_str(&text[last..]);
        out
    }

    /// An empty map sharing this anonymizer's detectors, for [`anonymize_into`](Self::anonymize_into).
    pub fn new_map(&self) -> PiiMap {
        PiiMap {
            det: Arc::clone(&self.det),
            entries: Vec::new(),
            by_key: HashMap::new(),
            by_placeholder: HashMap::new(),
            counters: [0; 4],
            literals: OnceLock::new(),
        }
    }
}

#[derive(Clone)]
struct Entry {
    kind: PiiKind,
    /// The normalized value (see the module docs).
    key: String,
    placeholder: String,
    /// Every surface form seen, the first one first (restored).
    forms: Vec<String>,
}

/// The placeholders of one anonymization and the originals behind them.
#[derive(Clone)]
pub struct PiiMap {
    det: Arc<Detectors>,
    entries: Vec<Entry>,
    by_key: HashMap<(PiiKind, String), usize>,
    /// `NAME_1` → entry.
    by_placeholder: HashMap<String, usize>,
    counters: [u32; 4],
    /// The literal-forms matcher for [`PiiMap::apply`], built on first use after a change.
    /// `None` inside when it could not be compiled (apply then relies on detection alone).
    literals: OnceLock<Option<detect::LiteralSet>>,
}

impl fmt::Debug for PiiMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PiiMap")
            .field("placeholders", &self.entries.len())
            .finish_non_exhaustive()
    }
}

impl PiiMap {
    fn intern(&mut self, kind: PiiKind, key: String, form: &str) -> usize {
        if let Some(&index) = self.by_key.get(&(kind, key.clone())) {
            let entry = &mut self.entries[index];
            if !entry.forms.iter().any(|f| f == form) {
                entry.forms.push(form.to_owned());
                self.literals = OnceLock::new();
            }
            return index;
        }
        let counter = &mut self.counters[kind.index()];
        *counter += 1;
        let bare = format!("{}_{}", kind.label(), counter);
        let index = self.entries.len();
        self.entries.push(Entry {
            kind,
            key: key.clone(),
            placeholder: format!("[{bare}]"),
            forms: vec![form.to_owned()],
        });
        self.by_key.insert((kind, key), index);
        self.by_placeholder.insert(bare, index);
        self.literals = OnceLock::new();
        index
    }

    /// How many distinct values the map holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Every original form seen (for tests: none of them may appear in anonymized text).
    pub fn originals(&self) -> impl Iterator<Item = &str> + '_ {
        self.entries
            .iter()
            .flat_map(|e| e.forms.iter().map(String::as_str))
    }

    /// The placeholders with their kind and the original they restore to, in numbering order
    /// per kind.
    pub fn placeholders(&self) -> impl Iterator<Item = (&str, PiiKind, &str)> + '_ {
        self.entries.iter().map(|e| {
            (
                e.placeholder.as_str(),
                e.kind,
                e.forms.first().map_or("", String::as_str),
            )
        })
    }

    /// The original behind a placeholder (`[NAME_1]` or `NAME_1`).
    pub fn original(&self, placeholder: &str) -> Option<&str> {
        let bare = placeholder
            .trim()
            .trim_start_matches('[')
            .trim_end_matches(']');
        self.by_placeholder
            .get(bare)
            .and_then(|&i| self.entries[i].forms.first())
            .map(String::as_str)
    }

    /// Puts the originals back in place of the placeholders this map knows (bracketed,
    /// spaced, Markdown-escaped or bare; see the module docs). Unknown placeholders stay.
    pub fn restore(&self, text: &str) -> String {
        self.det
            .placeholder
            .replace_all(text, |caps: &regex::Captures<'_>| {
                let label = caps.get(1).or_else(|| caps.get(3));
                let number = caps.get(2).or_else(|| caps.get(4));
                let original = match (label, number) {
                    (Some(label), Some(number)) => PiiKind::from_label(label.as_str())
                        .map(|kind| format!("{}_{}", kind.label(), number.as_str()))
                        .and_then(|bare| self.by_placeholder.get(&bare))
                        .and_then(|&i| self.entries[i].forms.first()),
                    _ => None,
                };
                match original {
                    Some(original) => original.clone(),
                    None => caps
                        .get(0)
                        .map_or_else(String::new, |m| m.as_str().to_owned()),
                }
            })
            .into_owned()
    }

    /// Replaces every value this map knows, wherever it occurs in `text` (another text, such as
    /// context sent along with the question), by its placeholder. Values are found both by
    /// detection (so another formatting of a known phone number or IBAN is caught) and
    /// literally, case-insensitively, as whole words. Values the map does not know are left:
    /// use [`Anonymizer::anonymize_into`] to hide those too.
    pub fn apply(&self, text: &str) -> String {
        let mut taken = detect::Taken::default();
        taken.extend(
            self.det
                .find(text)
                .into_iter()
                .filter(|f| self.by_key.contains_key(&(f.kind, f.key.clone()))),
        );
        if let Some(literals) = self.literals.get_or_init(|| self.build_literals()) {
            let by_form: HashMap<String, usize> = self
                .entries
                .iter()
                .enumerate()
                .flat_map(|(i, e)| e.forms.iter().map(move |f| (detect::name_key(f), i)))
                .collect();
            taken.extend(
                detect::find_literals(literals, text)
                    .into_iter()
                    .filter_map(|(start, end)| {
                        let index = *by_form.get(&detect::name_key(&text[start..end]))?;
                        let entry = &self.entries[index];
                        Some(detect::Found {
                            start,
                            end,
                            kind: entry.kind,
                            key: entry.key.clone(),
                        })
                    }),
            );
        }
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for f in taken.into_vec() {
            let Some(&index) = self.by_key.get(&(f.kind, f.key)) else {
                continue;
            };
            out.push_str(&text[last..f.start]);
            out.push_str(&self.entries[index].placeholder);
            last = f.end;
        }
        out.push_str(&text[last..]);
        out
    }

    fn forms_longest_first(&self) -> Vec<&str> {
        let mut forms: Vec<&str> = self
            .entries
            .iter()
            .flat_map(|e| e.forms.iter().map(String::as_str))
            .collect();
        forms.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
        forms.dedup();
        forms
    }

    fn build_literals(&self) -> Option<detect::LiteralSet> {
        let forms: Vec<String> = self
            .forms_longest_first()
            .into_iter()
            .map(str::to_owned)
            .collect();
        if forms.is_empty() {
            return None;
        }
        detect::literal_set(&forms).ok()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
