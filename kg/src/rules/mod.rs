//! The offline, deterministic extractor: proper-noun phrases, typed by small word lists, and a
//! handful of relation patterns within one sentence. Its reply is the contract's JSON (every
//! snippet is a verbatim slice of the text: the sentence, or a window of a very long one) and
//! goes through the same [`crate::reply::validate`] as any model's.
//!
//! # Pipeline
//!
//! 1. **Sentences** ([`text::sentences`]): `.`/`!`/`?` before whitespace and an uppercase
//!    letter, digit, quote or bullet (not after abbreviations or initials), blank lines, bullet
//!    and heading lines.
//! 2. **Names**: runs of capitalized words, with inner connectors ("Bank of the West",
//!    "Procter & Gamble"; "and" only inside an "of"/organization name), an attached ", Inc."
//!    suffix, at most 6 words. Titles (Mr, Dr, President…) and roles (CEO, founder…) are never
//!    part of a name but mark the next one as a person; stop words, months and weekdays never
//!    start one. A single capitalized word that opens a sentence is kept only when it is
//!    evidently a name: it appears capitalized mid-sentence elsewhere in the document, is in a
//!    word list, or is an acronym / mixed-case word ("NASA", "iPhone"). "Berlin-based" gives
//!    "Berlin".
//! 3. **Types**, strongest evidence first: a title or role before the name → person;
//!    gazetteer (countries, regions, major cities) → place; organization suffix words
//!    ("… Inc", "… GmbH", "… University", "… Bank") or heads ("University of …") →
//!    organization; event words ("… Summit", "… Conference") → event; place suffixes
//!    ("… River", "… County") → place; a known first name plus a surname → person. Then the
//!    type a relation pattern implies for an end ("X acquired Y": organizations; "based in Y":
//!    a place; "launched Y": a product), then "in Y" → place, else `concept`. One type per
//!    normalized name per document.
//! 4. **Aliases**: a lone "Doe" or "Acme" after "Jane Doe" / "Acme Robotics" in the same
//!    document is a mention of the full name (when exactly one full name fits).
//! 5. **Relations** ([`patterns`]): the text between two names of one sentence must match an
//!    anchored pattern as a whole: acquired, located_in (based/headquartered/located in;
//!    "Berlin, Germany"), works_at, leads ("X, CEO of Y", "Y CEO X"), founded_by ("X founded
//!    Y" gives Y founded_by X), part_of (subsidiary/division/part of), partner_of,
//!    customer_of, member_of, owns, produces, depends_on. A short appositive between them
//!    ("Acme, a Berlin startup, acquired Globex") is skipped.
//! 6. **Descriptions**: an appositive right after a name (", a maker of warehouse robots,").
//!
//! Precision over recall: every rule is anchored, and anything unsure becomes `concept` or no
//! relation. Nothing here iterates a hash map, so the output is a pure function of the text.

mod lexicon;
pub mod patterns;
pub mod text;

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use async_trait::async_trait;
use regex::Regex;

use crate::extractor::{Extractor, ExtractorError, Reply};
use crate::normalize::name_norm;
use crate::reply::{RawEntity, RawRelation, RawReply};
use lexicon::{
    contains, CONNECTORS, EVENT_WORDS, FIRST_NAMES, GAZETTEER, ORG_HEADS, ORG_SUFFIXES,
    PLACE_SUFFIXES, ROLES, STOP, TITLES,
};
use patterns::{appositive_end, match_gap, norm_gap, Cond, PAIR_CONTEXT};
use text::Tok;

/// Sentences longer than this (bytes) give a window around the names as snippet instead.
const MAX_SNIPPET: usize = 400;
const WINDOW: usize = 150;
const MAX_NAME_WORDS: usize = 6;
const MAX_GAP: usize = 160;

/// Evidence ranks for a type.
const STRONG: u8 = 3;
const PATTERN: u8 = 2;
const WEAK: u8 = 1;

/// The rules backend. Cheap to construct; its regexes compile once per process.
#[derive(Debug, Clone, Default)]
pub struct Rules;

impl Rules {
    pub fn new() -> Self {
        Rules
    }

    /// The reply for `text`, as the contract's raw types.
    pub fn reply_for(&self, text: &str) -> RawReply {
        Doc::new(text).reply()
    }

    /// The reply for `text`, serialized as the contract's JSON.
    pub fn reply_json(&self, text: &str) -> String {
        serde_json::to_string(&self.reply_for(text))
            .unwrap_or_else(|_| r#"{"entities":[],"relations":[]}"#.to_string())
    }
}

#[async_trait]
impl Extractor for Rules {
    fn name(&self) -> &str {
        "rules"
    }

    fn model(&self) -> &str {
        "rules-v1"
    }

    /// Runs on the blocking pool (a 12k-character document is a few milliseconds of CPU,
    /// too long to hold an async worker). The attempt number is irrelevant (the output is
    /// deterministic); usage is zero.
    async fn reply(&self, text: &str, _attempt: u32) -> Result<Reply, ExtractorError> {
        let text = text.to_string();
        let rules = self.clone();
        let raw = tokio::task::spawn_blocking(move || rules.reply_json(&text))
            .await
            .map_err(|e| ExtractorError::Permanent(format!("rules extractor failed: {e}")))?;
        Ok(Reply {
            raw,
            input_tokens: 0,
            output_tokens: 0,
            cost_usd: 0.0,
        })
    }
}

/// One name occurrence.
#[derive(Debug, Clone)]
struct Phrase {
    sent: usize,
    start: usize,
    end: usize,
    /// Words of the name (token texts).
    words: Vec<String>,
    /// A title or role right before it.
    person_marker: u8,
    /// Lowercase word right before it ("in", "at", …).
    prev: Option<String>,
    /// Type implied by a "-based"-style suffix.
    suffix_hint: Option<&'static str>,
    entity: usize,
}

#[derive(Debug, Clone)]
struct Ent {
    name: String,
    evidence: Vec<(&'static str, u8)>,
    description: String,
    kind: &'static str,
}

#[derive(Debug, Clone)]
struct RelCand {
    sent: usize,
    subject: usize,
    object: usize,
    predicate: &'static str,
    cond: Cond,
    start: usize,
    end: usize,
}

struct Doc<'a> {
    text: &'a str,
    sentences: Vec<(usize, usize)>,
    phrases: Vec<Phrase>,
    ents: Vec<Ent>,
    rels: Vec<RelCand>,
}

static DESCRIPTION: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^,\s+((?:a|an|the)\s[^,;()]{2,80}?)(?:,|;|\.(?:\s|$)|\)|$)").ok()
});

fn lower(w: &str) -> String {
    w.trim_end_matches('.').to_lowercase()
}

fn is_acronym_or_mixed(w: &str) -> bool {
    let letters: Vec<char> = w.chars().filter(|c| c.is_alphabetic()).collect();
    if letters.len() < 2 {
        return false;
    }
    let all_upper = letters.iter().all(|c| c.is_uppercase());
    let inner_upper = letters.iter().skip(1).any(|c| c.is_uppercase());
    all_upper || inner_upper
}

/// Hyphenated lowercase suffixes that are not part of a name ("Berlin-based").
fn split_suffix(word: &str) -> Option<(&str, &'static str)> {
    let (head, tail) = word.rsplit_once('-')?;
    let hint = match tail {
        "based" | "headquartered" | "born" => "place",
        "owned" | "backed" | "funded" | "led" | "made" => "organization",
        _ => return None,
    };
    (!head.is_empty()).then_some((head, hint))
}

/// A capitalized word that is a name wherever it stands: seen capitalized mid-sentence in the
/// document, in a word list, or an acronym / mixed-case word.
fn evident(word: &str, mid_caps: &HashSet<String>) -> bool {
    let lw = lower(word);
    mid_caps.contains(&lw)
        || contains(GAZETTEER, &lw)
        || contains(FIRST_NAMES, &lw)
        || contains(ORG_SUFFIXES, &lw)
        || contains(ORG_HEADS, &lw)
        || is_acronym_or_mixed(word)
}

fn blocked(l: &str) -> bool {
    contains(STOP, l) || contains(TITLES, l) || contains(ROLES, l)
}

impl<'a> Doc<'a> {
    fn new(text: &'a str) -> Self {
        let sentences = text::sentences(text);
        let mut doc = Doc {
            text,
            sentences,
            phrases: Vec::new(),
            ents: Vec::new(),
            rels: Vec::new(),
        };
        doc.find_phrases();
        doc.resolve_entities();
        doc.find_relations();
        doc.assign_types();
        doc.find_descriptions();
        doc
    }

    fn find_phrases(&mut self) {
        let toks: Vec<Vec<Tok<'a>>> = self
            .sentences
            .iter()
            .map(|&(a, b)| text::tokens(self.text, a, b))
            .collect();
        // Words seen capitalized somewhere other than a sentence's first word.
        let mut mid_caps: HashSet<String> = HashSet::new();
        for ts in &toks {
            let first = ts.iter().position(|t| t.word);
            for (k, t) in ts.iter().enumerate() {
                if Some(k) != first && t.is_cap() {
                    mid_caps.insert(lower(t.text));
                }
            }
        }
        for (sent, ts) in toks.iter().enumerate() {
            let first_word = ts.iter().position(|t| t.word);
            let mut marker = 0u8;
            let mut i = 0;
            while i < ts.len() {
                let t = ts[i];
                let l = lower(t.text);
                if !t.is_cap() {
                    // "." after a title keeps the marker ("Dr. Jane Doe").
                    if !(t.text == "." && marker > 0) {
                        marker = 0;
                    }
                    i += 1;
                    continue;
                }
                if contains(TITLES, &l) {
                    marker = STRONG;
                    i += 1;
                    continue;
                }
                if contains(ROLES, &l) {
                    marker = marker.max(PATTERN);
                    i += 1;
                    continue;
                }
                if contains(STOP, &l)
                    || l == "i"
                    || crate::normalize::ORG_SUFFIXES.contains(&l.as_str())
                    || (t.text.chars().count() == 1 && !t.text.chars().any(char::is_numeric))
                {
                    marker = 0;
                    i += 1;
                    continue;
                }
                // "Shares of Acme": a sentence's first word before a connector is not part
                // of a name unless it is evidently one.
                if Some(i) == first_word
                    && ts
                        .get(i + 1)
                        .is_some_and(|n| n.word && contains(CONNECTORS, &lower(n.text)))
                    && !evident(t.text, &mid_caps)
                {
                    marker = 0;
                    i += 1;
                    continue;
                }
                // A name starts here.
                let mut j = i + 1;
                let mut words = 1;
                loop {
                    // "Berlin-based Acme": the suffixed word ends the name.
                    if words >= MAX_NAME_WORDS
                        || j >= ts.len()
                        || split_suffix(ts[j - 1].text).is_some()
                    {
                        break;
                    }
                    let n = ts[j];
                    if n.is_cap() && !blocked(&lower(n.text)) {
                        j += 1;
                        words += 1;
                        continue;
                    }
                    // Connectors: "of", "of the", "&", and "and" only inside an "of" name before
                    // one last word ("Ministry of Economy and Finance", not "Bank of America
                    // and Deutsche Bank").
                    let c = lower(n.text);
                    if n.word && contains(CONNECTORS, &c) {
                        let mut k = j + 1;
                        if k < ts.len() && contains(CONNECTORS, &lower(ts[k].text)) {
                            k += 1;
                        }
                        let so_far: Vec<String> = ts[i..j].iter().map(|t| lower(t.text)).collect();
                        let and_ok = so_far.iter().any(|w| w == "of")
                            && !ts.get(k + 1).is_some_and(|t| t.is_cap());
                        let ok_conn = match c.as_str() {
                            "and" => and_ok,
                            "the" => false,
                            _ => true,
                        };
                        if ok_conn && k < ts.len() && ts[k].is_cap() && !blocked(&lower(ts[k].text))
                        {
                            j = k + 1;
                            words += 1;
                            continue;
                        }
                    }
                    break;
                }
                // ", Inc." right after the name.
                if j + 1 < ts.len() && ts[j].text == "," {
                    let suf = lower(ts[j + 1].text);
                    if crate::normalize::ORG_SUFFIXES.contains(&suf.as_str()) && ts[j + 1].is_cap()
                    {
                        j += 2;
                    }
                }
                // An attached period of an abbreviated suffix ("Inc."), unless it ends the
                // sentence.
                if j + 1 < ts.len()
                    && ts[j].text == "."
                    && ts[j].start == ts[j - 1].end
                    && crate::normalize::ORG_SUFFIXES.contains(&lower(ts[j - 1].text).as_str())
                {
                    j += 1;
                }
                let mut start = t.start;
                let mut end = ts[j - 1].end;
                let mut words: Vec<String> = ts[i..j]
                    .iter()
                    .filter(|t| t.word)
                    .map(|t| t.text.to_string())
                    .collect();
                let mut suffix_hint = None;
                if let Some(last) = words.last().cloned() {
                    if let Some((head, hint)) = split_suffix(&last) {
                        suffix_hint = Some(hint);
                        end -= last.len() - head.len();
                        if let Some(w) = words.last_mut() {
                            *w = head.to_string();
                        }
                    }
                }
                // A lone capitalized word opening the sentence must be evidently a name.
                if Some(i) == first_word
                    && words.len() == 1
                    && !(evident(&words[0], &mid_caps) || suffix_hint.is_some())
                {
                    marker = 0;
                    i = j;
                    continue;
                }
                // Trim a trailing connector or punctuation (cannot happen by construction, but
                // keep names clean if the token rules change).
                while let Some(last) = words.last() {
                    if contains(CONNECTORS, &lower(last)) {
                        words.pop();
                    } else {
                        break;
                    }
                }
                if words.is_empty() || start >= end {
                    i = j;
                    continue;
                }
                let name = &self.text[start..end];
                if name_norm(name).is_empty() {
                    i = j;
                    continue;
                }
                // Drop leading/trailing whitespace inside the slice (none expected).
                let trimmed = name.trim();
                start += name.len() - name.trim_start().len();
                end = start + trimmed.len();
                let prev = i
                    .checked_sub(1)
                    .map(|k| ts[k])
                    .filter(|p| p.word)
                    .map(|p| lower(p.text));
                self.phrases.push(Phrase {
                    sent,
                    start,
                    end,
                    words,
                    person_marker: marker,
                    prev,
                    suffix_hint,
                    entity: usize::MAX,
                });
                marker = 0;
                i = j;
            }
        }
    }

    /// Strong type evidence from a name's own words.
    fn classify(p: &Phrase, text: &str) -> Option<&'static str> {
        let lw: Vec<String> = p.words.iter().map(|w| lower(w)).collect();
        let whole = norm_gap(&text[p.start..p.end])
            .trim_end_matches('.')
            .to_string();
        let first = lw.first()?;
        let last = lw.last()?;
        if p.person_marker == STRONG {
            return Some("person");
        }
        if contains(GAZETTEER, &whole) {
            return Some("place");
        }
        if contains(ORG_SUFFIXES, last) || lw.iter().any(|w| w == "inc" || w == "gmbh") {
            return Some("organization");
        }
        if lw.len() >= 3
            && contains(ORG_HEADS, first)
            && matches!(lw[1].as_str(), "of" | "for" | "de")
        {
            return Some("organization");
        }
        if lw.iter().any(|w| contains(EVENT_WORDS, w)) {
            return Some("event");
        }
        if lw.len() >= 2 && contains(PLACE_SUFFIXES, last) {
            return Some("place");
        }
        let plain_words = p.words.iter().all(|w| {
            w.chars().next().is_some_and(char::is_uppercase)
                && !is_acronym_or_mixed(w)
                && w.chars()
                    .all(|c| c.is_alphabetic() || matches!(c, '-' | '\'' | '’' | '.'))
        });
        if lw.len() >= 2 && lw.len() <= 4 && contains(FIRST_NAMES, first) && plain_words {
            return Some("person");
        }
        if p.person_marker == PATTERN && lw.len() >= 2 && plain_words {
            return Some("person");
        }
        None
    }

    fn resolve_entities(&mut self) {
        let strong: Vec<Option<&'static str>> = self
            .phrases
            .iter()
            .map(|p| Self::classify(p, self.text))
            .collect();
        // Full names an alias may point at: (word, name_norm, first spelling) for multi-word
        // persons' first and last words and organizations' first words.
        let mut alias_targets: Vec<(String, String, String)> = Vec::new();
        for (p, k) in self.phrases.iter().zip(&strong) {
            if p.words.len() < 2 {
                continue;
            }
            let name = &self.text[p.start..p.end];
            let norm = name_norm(name);
            let mut add = |w: &str| {
                if !alias_targets
                    .iter()
                    .any(|(aw, an, _)| aw == w && *an == norm)
                {
                    alias_targets.push((w.to_string(), norm.clone(), name.to_string()));
                }
            };
            match k {
                Some("person") => {
                    if let Some(w) = p.words.last() {
                        add(w);
                    }
                    if let Some(w) = p.words.first() {
                        add(w);
                    }
                }
                Some("organization") => {
                    if let Some(w) = p.words.first() {
                        add(w);
                    }
                }
                _ => {}
            }
        }
        let mut by_norm: HashMap<String, usize> = HashMap::new();
        for (idx, p) in self.phrases.iter_mut().enumerate() {
            let name = &self.text[p.start..p.end];
            let mut norm = name_norm(name);
            let mut display = name.to_string();
            if p.words.len() == 1 && strong[idx].is_none() {
                let targets: Vec<&(String, String, String)> = alias_targets
                    .iter()
                    .filter(|(w, _, _)| *w == p.words[0])
                    .collect();
                if let [(_, target_norm, target_name)] = targets.as_slice() {
                    norm = target_norm.clone();
                    display = target_name.clone();
                }
            }
            let e = match by_norm.get(&norm) {
                Some(&e) => e,
                None => {
                    self.ents.push(Ent {
                        name: display,
                        evidence: Vec::new(),
                        description: String::new(),
                        kind: "concept",
                    });
                    by_norm.insert(norm, self.ents.len() - 1);
                    self.ents.len() - 1
                }
            };
            p.entity = e;
            if let Some(k) = strong[idx] {
                self.ents[e].evidence.push((k, STRONG));
            }
            if let Some(h) = p.suffix_hint {
                self.ents[e].evidence.push((h, PATTERN));
            }
            if p.person_marker == PATTERN {
                self.ents[e].evidence.push(("person", PATTERN));
            }
            if matches!(p.prev.as_deref(), Some("in" | "near")) {
                self.ents[e].evidence.push(("place", WEAK));
            }
        }
    }

    fn find_relations(&mut self) {
        // Phrases are in text order, so each sentence's are one run.
        for group in self.phrases.chunk_by(|a, b| a.sent == b.sent) {
            let sent = group[0].sent;
            let s_start = self.sentences[sent].0;
            let spans: Vec<&Phrase> = group.iter().collect();
            for i in 0..spans.len() {
                for j in i + 1..spans.len().min(i + 4) {
                    let (a, b) = (spans[i], spans[j]);
                    if a.entity == b.entity || b.start < a.end || b.start - a.end > MAX_GAP {
                        continue;
                    }
                    let raw_gap = &self.text[a.end..b.start];
                    let gap = norm_gap(raw_gap);
                    // Names in between are allowed only inside a leading appositive.
                    if j > i + 1 {
                        let Some(app) = appositive_end(&gap) else {
                            continue;
                        };
                        let inner_ok = spans[i + 1..j]
                            .iter()
                            .all(|m| norm_gap(&self.text[a.end..m.end]).len() < app);
                        if !inner_ok {
                            continue;
                        }
                    }
                    let rule = match match_gap(&gap) {
                        Some(r) => {
                            Some((r.predicate, r.reverse, r.hint_first, r.hint_second, r.cond))
                        }
                        None => {
                            // "a partnership between X and Y"
                            let before = norm_gap(&self.text[s_start..a.start]);
                            let pair = PAIR_CONTEXT.as_ref().is_some_and(|re| re.is_match(&before));
                            (pair && matches!(gap.as_str(), "and" | "&")).then_some((
                                "partner_of",
                                false,
                                None,
                                None,
                                Cond::None,
                            ))
                        }
                    };
                    let Some((predicate, reverse, h1, h2, cond)) = rule else {
                        continue;
                    };
                    if let Some(h) = h1 {
                        self.ents[a.entity].evidence.push((h, PATTERN));
                    }
                    if let Some(h) = h2 {
                        self.ents[b.entity].evidence.push((h, PATTERN));
                    }
                    let (subject, object) = if reverse {
                        (b.entity, a.entity)
                    } else {
                        (a.entity, b.entity)
                    };
                    self.rels.push(RelCand {
                        sent,
                        subject,
                        object,
                        predicate,
                        cond,
                        start: a.start,
                        end: b.end,
                    });
                }
            }
        }
    }

    fn assign_types(&mut self) {
        for e in &mut self.ents {
            let mut best: Option<(&'static str, u8)> = None;
            for &(k, r) in &e.evidence {
                if best.is_none_or(|(_, br)| r > br) {
                    best = Some((k, r));
                }
            }
            e.kind = best.map_or("concept", |(k, _)| k);
        }
        let ents = &self.ents;
        self.rels.retain_mut(|r| match r.cond {
            Cond::None => true,
            Cond::PersonElse(alt) => {
                if ents[r.subject].kind != "person" {
                    r.predicate = alt;
                }
                true
            }
            Cond::OrgInPlace => {
                matches!(ents[r.subject].kind, "organization" | "event")
                    && ents[r.object].kind == "place"
            }
            Cond::BothPlaces => ents[r.subject].kind == "place" && ents[r.object].kind == "place",
        });
    }

    fn find_descriptions(&mut self) {
        let Some(re) = DESCRIPTION.as_ref() else {
            return;
        };
        for p in &self.phrases {
            let (_, s_end) = self.sentences[p.sent];
            let rest = &self.text[p.end..s_end];
            if let Some(c) = re.captures(rest) {
                if let Some(m) = c.get(1) {
                    let d = m.as_str().trim();
                    let e = &mut self.ents[p.entity];
                    if d.chars().count() > e.description.chars().count() {
                        e.description = d.to_string();
                    }
                }
            }
        }
    }

    /// A verbatim snippet for a fact at `focus` in sentence `sent`: the sentence, or a window
    /// around the focus when the sentence is very long.
    fn snippet(&self, sent: usize, focus: (usize, usize)) -> &'a str {
        let (s, e) = self.sentences[sent];
        if e - s <= MAX_SNIPPET {
            return &self.text[s..e];
        }
        let t = self.text;
        let mut a = focus.0.saturating_sub(WINDOW).max(s);
        while !t.is_char_boundary(a) {
            a += 1;
        }
        if a > s {
            if let Some(ws) = t[a..focus.0].find(char::is_whitespace) {
                a += ws;
            }
        }
        let mut b = (focus.1 + WINDOW).min(e);
        while !t.is_char_boundary(b) {
            b -= 1;
        }
        if b < e {
            if let Some(ws) = t[focus.1..b].rfind(char::is_whitespace) {
                b = focus.1 + ws;
            }
        }
        t[a..b].trim()
    }

    fn reply(&self) -> RawReply {
        let mut out = RawReply::default();
        let mut seen: HashSet<(usize, &str)> = HashSet::new();
        for p in &self.phrases {
            let snippet = self.snippet(p.sent, (p.start, p.end));
            if !seen.insert((p.entity, snippet)) {
                continue;
            }
            let e = &self.ents[p.entity];
            out.entities.push(RawEntity {
                entity_type: e.kind.to_string(),
                name: e.name.clone(),
                description: e.description.clone(),
                snippet: snippet.to_string(),
            });
        }
        let mut seen_rel: HashSet<(usize, &str, usize, &str)> = HashSet::new();
        for r in &self.rels {
            let snippet = self.snippet(r.sent, (r.start, r.end));
            if !seen_rel.insert((r.subject, r.predicate, r.object, snippet)) {
                continue;
            }
            out.relations.push(RawRelation {
                subject: self.ents[r.subject].name.clone(),
                predicate: r.predicate.to_string(),
                object: self.ents[r.object].name.clone(),
                snippet: snippet.to_string(),
            });
        }
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
