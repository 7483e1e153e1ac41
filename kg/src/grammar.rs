//! A byte-level state machine for exactly the reply contract's JSON, used to constrain a local
//! model's decoding:
//!
//! ```text
//! {"entities":[{"type":"…","name":"…","description":"…","snippet":"…"},…],
//!  "relations":[{"subject":"…","predicate":"…","object":"…","snippet":"…"},…]}
//! ```
//!
//! No whitespace outside strings, keys in this order, at most
//! [`GrammarConfig::max_entities`] entities and [`GrammarConfig::max_relations`] relations
//! (at the cap only the closing `]` is allowed). It works on bytes, so it can judge any
//! vocabulary token (a byte-level BPE token may be part of a UTF-8 character); strings are kept
//! valid UTF-8 by tracking continuation bytes. Beyond the shape, each string field has a
//! content rule, chosen so that what the grammar admits also passes [`crate::reply::validate`]:
//!
//! | field | rule |
//! |---|---|
//! | `type` | one of [`GrammarConfig::types`] (or `[a-z_]+` when empty) |
//! | `name` | starts alphanumeric; no `"`, `\`, control characters; ≤ `max_name` bytes and 6 words, not past a sentence end; with `source_bound`, a substring of the source ending at a word boundary; with `unique_names`, not a name already emitted |
//! | `description` | a JSON string (short escapes only), ≤ `max_description` bytes; with `source_bound`, empty or a substring of the source; with `one_sentence`, nothing after a sentence end |
//! | `snippet` | ≥ `min_snippet` bytes (or the whole source when shorter), ≤ `max_snippet`; with `source_bound`, its decoded value is a substring of the source; with `one_sentence`, nothing after a `.`/`!`/`?` followed by whitespace |
//! | `subject`, `object` | exactly the name of an entity already emitted; the object differs from the subject; one relation per (subject, object) pair |
//! | `predicate` | `[a-z][a-z_]*`, ≤ `max_predicate` bytes |
//!
//! Substring checks use a suffix array of the source: the set of source positions a string's
//! prefix matches is one contiguous range of suffixes, narrowed by two binary searches per
//! byte, so the state stays a few integers and checking a token costs a few comparisons per
//! byte. Entity names for `subject`/`object` are kept sorted and matched the same way.
//!
//! [`JsonGrammar::finish`] returns the output so far when it is complete; otherwise the output
//! up to the last complete entity or relation, closed (`],"relations":[]}` or `]}`), which is
//! how a capped token budget still yields grammatical JSON.

use std::sync::Arc;

/// Limits and content rules of the grammar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrammarConfig {
    pub max_entities: usize,
    pub max_relations: usize,
    /// Allowed entity types; empty allows any `[a-z_]+` (≤ 24 bytes).
    pub types: Vec<String>,
    /// Names, descriptions and snippets must be substrings of the source text.
    pub source_bound: bool,
    /// An entity name may not repeat one already emitted (exact bytes).
    pub unique_names: bool,
    /// A snippet ends at the first sentence end (`.`, `!`, `?` then whitespace) once it holds
    /// its names; descriptions likewise; names never run past a sentence end.
    pub one_sentence: bool,
    /// An entity's snippet contains its name; a relation's contains its subject and object.
    pub snippet_names: bool,
    pub max_name: usize,
    pub max_description: usize,
    /// A non-empty description has at least this many bytes (unless the source ends).
    pub min_description: usize,
    pub min_snippet: usize,
    pub max_snippet: usize,
    pub max_predicate: usize,
}

impl Default for GrammarConfig {
    fn default() -> Self {
        GrammarConfig {
            max_entities: 8,
            max_relations: 6,
            types: crate::normalize::STARTER_TYPES
                .iter()
                .map(|s| s.to_string())
                .collect(),
            source_bound: true,
            unique_names: true,
            one_sentence: true,
            snippet_names: true,
            max_name: 48,
            max_description: 80,
            min_description: 8,
            min_snippet: 12,
            max_snippet: 240,
            max_predicate: 32,
        }
    }
}

const LITS: [&[u8]; 15] = [
    b"{\"entities\":[",
    b"{\"type\":\"",
    b",{\"type\":\"",
    b",\"name\":\"",
    b",\"description\":\"",
    b",\"snippet\":\"",
    b"}",
    b"],\"relations\":[",
    b"{\"subject\":\"",
    b",{\"subject\":\"",
    b",\"predicate\":\"",
    b",\"object\":\"",
    b",\"snippet\":\"",
    b"}",
    b"]}",
];
const L_START: u8 = 0;
const L_EOPEN: u8 = 1;
const L_EOPEN2: u8 = 2;
const L_NAME: u8 = 3;
const L_DESC: u8 = 4;
const L_ESNIP: u8 = 5;
const L_EEND: u8 = 6;
const L_RELS: u8 = 7;
const L_ROPEN: u8 = 8;
const L_ROPEN2: u8 = 9;
const L_PRED: u8 = 10;
const L_OBJ: u8 = 11;
const L_RSNIP: u8 = 12;
const L_REND: u8 = 13;
const L_END: u8 = 14;

/// At most this many spaces (so 6 words) in a name.
const MAX_NAME_SPACES: u8 = 5;
const CLOSE_ENTITIES: &str = "],\"relations\":[]}";
const CLOSE_RELATIONS: &str = "]}";
const EMPTY: &str = "{\"entities\":[],\"relations\":[]}";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Type,
    Name,
    Desc,
    ESnip,
    Subj,
    Pred,
    Obj,
    RSnip,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pos {
    Lit(u8, u8),
    Str(Field),
    EntOpen,
    EntNext,
    RelOpen,
    RelNext,
    Done,
}

/// The scalar decoding state (cheap to copy for trying a token).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cursor {
    pos: Pos,
    /// Decoded bytes in the current string.
    len: u16,
    esc: bool,
    /// UTF-8 continuation bytes still expected.
    pending: u8,
    /// Candidate range (suffix array or sorted options) for constrained strings.
    lo: u32,
    hi: u32,
    /// For names: the range of already-emitted names the prefix matches (duplicates).
    nlo: u32,
    nhi: u32,
    /// For snippets: 1 after sentence-ending punctuation, 2 once whitespace followed it.
    sentence_end: u8,
    /// Spaces in the current string (names hold at most `MAX_NAME_SPACES`).
    spaces: u8,
    /// Index in the sorted names of the current relation's subject (its object must differ)
    /// and object.
    subject: u32,
    object: u32,
    /// Bytes of the snippet's first and second required name matched so far (KMP states).
    m1: u16,
    m2: u16,
    entities: u16,
    relations: u16,
}

enum Rule<'g> {
    /// Matches a sorted option list.
    Options(&'g [Vec<u8>]),
    /// Substring of the source (via the suffix array).
    Source,
    Free,
}

/// The grammar with its decoding state. See the module docs.
#[derive(Debug, Clone)]
pub struct JsonGrammar {
    cfg: GrammarConfig,
    src: Arc<[u8]>,
    /// Suffix array of `src` (start offsets, sorted by suffix).
    sa: Arc<[u32]>,
    types: Vec<Vec<u8>>,
    /// Names of entities emitted so far, sorted, deduplicated, with their KMP failure tables.
    names: Vec<Vec<u8>>,
    fails: Vec<Vec<u16>>,
    name_buf: Vec<u8>,
    /// (subject, object) name indices of the relations emitted so far.
    pairs: Vec<(u32, u32)>,
    /// The last entity name emitted (the one the current entity snippet must contain).
    cur_name: Vec<u8>,
    cur_fail: Vec<u16>,
    cur: Cursor,
    out: Vec<u8>,
    /// Output length at the last complete item, and the literal that closes from there.
    checkpoint: (usize, &'static str),
}

impl JsonGrammar {
    /// A grammar for replies about `source`.
    pub fn new(mut cfg: GrammarConfig, source: &str) -> Self {
        let src = source.as_bytes().to_vec();
        let sa = if cfg.source_bound {
            let mut sa: Vec<u32> = (0..src.len() as u32).collect();
            sa.sort_unstable_by(|&a, &b| src[a as usize..].cmp(&src[b as usize..]));
            sa
        } else {
            Vec::new()
        };
        // No alphanumeric character to start a name with: no entity can be written.
        if cfg.source_bound && !source.chars().any(char::is_alphanumeric) {
            cfg.max_entities = 0;
        }
        let mut types: Vec<Vec<u8>> = cfg
            .types
            .iter()
            .map(|t| t.as_bytes().to_vec())
            .filter(|t| !t.is_empty() && !t.iter().any(|b| *b == b'"' || *b == b'\\' || *b < 0x20))
            .collect();
        types.sort();
        types.dedup();
        JsonGrammar {
            cfg,
            src: src.into(),
            sa: sa.into(),
            types,
            names: Vec::new(),
            fails: Vec::new(),
            pairs: Vec::new(),
            name_buf: Vec::new(),
            cur_name: Vec::new(),
            cur_fail: Vec::new(),
            cur: Cursor {
                pos: Pos::Lit(L_START, 0),
                len: 0,
                esc: false,
                pending: 0,
                lo: 0,
                hi: 0,
                nlo: 0,
                nhi: 0,
                sentence_end: 0,
                spaces: 0,
                subject: u32::MAX,
                object: u32::MAX,
                m1: 0,
                m2: 0,
                entities: 0,
                relations: 0,
            },
            out: Vec::new(),
            checkpoint: (0, EMPTY),
        }
    }

    /// Whether the document is complete.
    pub fn is_done(&self) -> bool {
        self.cur.pos == Pos::Done
    }

    /// The bytes accepted so far.
    pub fn output(&self) -> &[u8] {
        &self.out
    }

    /// Whether `bytes` may come next. Empty input is never accepted (a token that decodes to
    /// nothing, such as a control token, must not be chosen).
    pub fn accepts(&self, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return false;
        }
        let mut c = self.cur;
        for (i, &b) in bytes.iter().enumerate() {
            let in_name = c.pos == Pos::Str(Field::Name);
            if !self.step(&mut c, b) {
                return false;
            }
            if in_name && c.pos != Pos::Str(Field::Name) && i + 1 < bytes.len() {
                // A name closed and more follows, which may depend on it (a relation naming
                // it): replay on a copy that records names. Rare, and the copy is cheap.
                return self.clone().commit(bytes);
            }
        }
        true
    }

    /// Append `bytes` if they are accepted; returns whether they were (nothing changes if not).
    pub fn advance(&mut self, bytes: &[u8]) -> bool {
        if bytes.is_empty() {
            return true;
        }
        if !self.accepts(bytes) {
            return false;
        }
        self.commit(bytes)
    }

    /// Apply `bytes` one by one, recording names and checkpoints. On a rejected byte the
    /// grammar is left part-way: callers check with [`Self::accepts`] first.
    fn commit(&mut self, bytes: &[u8]) -> bool {
        for &b in bytes {
            let before = self.cur;
            let mut c = self.cur;
            if !self.step(&mut c, b) {
                return false;
            }
            self.record(before, c, b);
            self.cur = c;
            self.out.push(b);
            match c.pos {
                Pos::EntOpen | Pos::EntNext => self.checkpoint = (self.out.len(), CLOSE_ENTITIES),
                Pos::RelOpen | Pos::RelNext => self.checkpoint = (self.out.len(), CLOSE_RELATIONS),
                Pos::Done => self.checkpoint = (self.out.len(), ""),
                _ => {}
            }
        }
        true
    }

    /// Track entity names while committing bytes.
    fn record(&mut self, before: Cursor, after: Cursor, b: u8) {
        if after.pos == Pos::RelNext && before.pos != Pos::RelNext {
            self.pairs.push((after.subject, after.object));
        }
        if before.pos != Pos::Str(Field::Name) {
            return;
        }
        if after.pos == Pos::Str(Field::Name) {
            self.name_buf.push(b);
        } else {
            let name = std::mem::take(&mut self.name_buf);
            let fail = kmp_fail(&name);
            if let Err(i) = self.names.binary_search(&name) {
                self.names.insert(i, name.clone());
                self.fails.insert(i, fail.clone());
            }
            self.cur_name = name;
            self.cur_fail = fail;
        }
    }

    /// The reply: the output if complete, else the output up to the last complete item, closed.
    pub fn finish(&self) -> String {
        let bytes: Vec<u8> = if self.is_done() {
            self.out.clone()
        } else {
            let (at, close) = self.checkpoint;
            let mut v = self.out[..at].to_vec();
            if at == 0 {
                return EMPTY.to_string();
            }
            v.extend_from_slice(close.as_bytes());
            v
        };
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn rule(&self, f: Field) -> Rule<'_> {
        match f {
            Field::Type if !self.types.is_empty() => Rule::Options(&self.types),
            Field::Subj | Field::Obj => Rule::Options(&self.names),
            Field::Name | Field::Desc | Field::ESnip | Field::RSnip if self.cfg.source_bound => {
                Rule::Source
            }
            _ => Rule::Free,
        }
    }

    fn min_snippet(&self) -> usize {
        self.cfg
            .min_snippet
            .min(self.cfg.max_snippet)
            .clamp(1, self.src.len().max(1))
    }

    /// The least length at which a string may close (a description may also be empty).
    fn min_len(&self, f: Field) -> usize {
        match f {
            Field::Desc => self.cfg.min_description.min(self.cfg.max_description),
            Field::ESnip | Field::RSnip => self.min_snippet(),
            _ => 1,
        }
    }

    /// The names a snippet must contain, with their failure tables.
    #[allow(clippy::type_complexity)]
    fn required_names(
        &self,
        c: &Cursor,
        f: Field,
    ) -> (Option<(&[u8], &[u16])>, Option<(&[u8], &[u16])>) {
        let named = |i: u32| {
            let i = i as usize;
            match (self.names.get(i), self.fails.get(i)) {
                (Some(n), Some(f)) => Some((n.as_slice(), f.as_slice())),
                _ => None,
            }
        };
        match f {
            Field::ESnip if !self.cur_name.is_empty() => {
                (Some((&self.cur_name, &self.cur_fail)), None)
            }
            Field::RSnip => (named(c.subject), named(c.object)),
            _ => (None, None),
        }
    }

    /// Whether a snippet holds every name it must (always true for other fields).
    fn names_found(&self, c: &Cursor, f: Field) -> bool {
        if !self.cfg.snippet_names || !matches!(f, Field::ESnip | Field::RSnip) {
            return true;
        }
        let (a, b) = self.required_names(c, f);
        a.is_none_or(|(p, _)| c.m1 as usize == p.len())
            && b.is_none_or(|(p, _)| c.m2 as usize == p.len())
    }

    fn max_len(&self, f: Field) -> usize {
        match f {
            Field::Type => 24,
            Field::Name | Field::Subj | Field::Obj => self.cfg.max_name,
            Field::Desc => self.cfg.max_description,
            Field::ESnip | Field::RSnip => self.cfg.max_snippet,
            Field::Pred => self.cfg.max_predicate,
        }
    }

    fn enter(&self, c: &mut Cursor, f: Field) {
        c.pos = Pos::Str(f);
        c.len = 0;
        c.esc = false;
        c.pending = 0;
        c.sentence_end = 0;
        c.spaces = 0;
        c.m1 = 0;
        c.m2 = 0;
        c.nlo = 0;
        c.nhi = if f == Field::Name && self.cfg.unique_names {
            self.names.len() as u32
        } else {
            0
        };
        c.lo = 0;
        c.hi = match self.rule(f) {
            Rule::Options(o) => o.len() as u32,
            Rule::Source => self.sa.len() as u32,
            Rule::Free => 0,
        };
    }

    /// One byte from state `c`; false (and `c` unspecified) when it is not allowed.
    fn step(&self, c: &mut Cursor, b: u8) -> bool {
        match c.pos {
            Pos::Done => false,
            Pos::Lit(id, off) => {
                let lit = LITS[id as usize];
                if lit.get(off as usize) != Some(&b) {
                    return false;
                }
                let off = off + 1;
                if (off as usize) < lit.len() {
                    c.pos = Pos::Lit(id, off);
                    return true;
                }
                match id {
                    L_START => c.pos = Pos::EntOpen,
                    L_EOPEN | L_EOPEN2 => self.enter(c, Field::Type),
                    L_NAME => self.enter(c, Field::Name),
                    L_DESC => self.enter(c, Field::Desc),
                    L_ESNIP => self.enter(c, Field::ESnip),
                    L_EEND => {
                        c.entities += 1;
                        c.pos = Pos::EntNext;
                    }
                    L_RELS => c.pos = Pos::RelOpen,
                    L_ROPEN | L_ROPEN2 => self.enter(c, Field::Subj),
                    L_PRED => self.enter(c, Field::Pred),
                    L_OBJ => self.enter(c, Field::Obj),
                    L_RSNIP => self.enter(c, Field::RSnip),
                    L_REND => {
                        c.relations += 1;
                        c.pos = Pos::RelNext;
                    }
                    _ => c.pos = Pos::Done,
                }
                true
            }
            Pos::EntOpen | Pos::EntNext => {
                let more = (c.entities as usize) < self.cfg.max_entities;
                match (b, c.pos) {
                    (b'{', Pos::EntOpen) if more => c.pos = Pos::Lit(L_EOPEN, 1),
                    (b',', Pos::EntNext) if more => c.pos = Pos::Lit(L_EOPEN2, 1),
                    (b']', _) => c.pos = Pos::Lit(L_RELS, 1),
                    _ => return false,
                }
                true
            }
            Pos::RelOpen | Pos::RelNext => {
                let more =
                    (c.relations as usize) < self.cfg.max_relations && !self.names.is_empty();
                match (b, c.pos) {
                    (b'{', Pos::RelOpen) if more => c.pos = Pos::Lit(L_ROPEN, 1),
                    (b',', Pos::RelNext) if more => c.pos = Pos::Lit(L_ROPEN2, 1),
                    (b']', _) => c.pos = Pos::Lit(L_END, 1),
                    _ => return false,
                }
                true
            }
            Pos::Str(f) => self.string_byte(c, f, b),
        }
    }

    fn string_byte(&self, c: &mut Cursor, f: Field, b: u8) -> bool {
        let escapes = matches!(f, Field::Desc | Field::ESnip | Field::RSnip);
        if c.esc {
            let d = match b {
                b'"' => b'"',
                b'\\' => b'\\',
                b'/' => b'/',
                b'n' => b'\n',
                b'r' => b'\r',
                b't' => b'\t',
                _ => return false,
            };
            c.esc = false;
            return self.content(c, f, d);
        }
        match b {
            b'"' => self.close(c, f),
            b'\\' if escapes => {
                // Room for the escaped byte is checked when it arrives.
                c.esc = true;
                (c.len as usize) < self.max_len(f) && c.pending == 0
            }
            b'\\' => false,
            _ if b < 0x20 => false,
            _ => self.content(c, f, b),
        }
    }

    fn close(&self, c: &mut Cursor, f: Field) -> bool {
        if c.pending != 0 {
            return false;
        }
        let min = self.min_len(f);
        // A string that reached the end of the source may close however short it is (it
        // could not continue).
        let at_source_end = matches!(self.rule(f), Rule::Source)
            && c.lo < c.hi
            && self.src.len() - self.sa[c.lo as usize] as usize == c.len as usize;
        let empty_ok = f == Field::Desc && c.len == 0;
        if (c.len as usize) < min && !empty_ok && !(at_source_end && c.len > 0) {
            return false;
        }
        if !self.names_found(c, f) {
            return false;
        }
        // A name ends at a word boundary of the source ("Globex Media", not "Globex Med").
        if f == Field::Name && matches!(self.rule(f), Rule::Source) {
            let len = c.len as usize;
            let boundary = self.sa[c.lo as usize..c.hi as usize].iter().any(|&st| {
                self.src
                    .get(st as usize + len)
                    .is_none_or(|b| !b.is_ascii_alphanumeric() && *b < 0x80)
            });
            if !boundary {
                return false;
            }
        }
        // A name equal to one already emitted (sorted: an exact match comes first).
        if f == Field::Name && c.nlo < c.nhi && self.names[c.nlo as usize].len() == c.len as usize {
            return false;
        }
        if let Rule::Options(opts) = self.rule(f) {
            // Sorted: an option equal to the prefix comes first in the range.
            if c.lo >= c.hi || opts[c.lo as usize].len() != c.len as usize {
                return false;
            }
        }
        match f {
            Field::Subj => c.subject = c.lo,
            // No relation from an entity to itself.
            Field::Obj if c.lo == c.subject => return false,
            // One relation per (subject, object) pair.
            Field::Obj if self.pairs.contains(&(c.subject, c.lo)) => return false,
            Field::Obj => c.object = c.lo,
            _ => {}
        }
        let next = match f {
            Field::Type => L_NAME,
            Field::Name => L_DESC,
            Field::Desc => L_ESNIP,
            Field::ESnip => L_EEND,
            Field::Subj => L_PRED,
            Field::Pred => L_OBJ,
            Field::Obj => L_RSNIP,
            Field::RSnip => L_REND,
        };
        c.pos = Pos::Lit(next, 0);
        true
    }

    /// One decoded content byte of a string.
    fn content(&self, c: &mut Cursor, f: Field, d: u8) -> bool {
        let len = c.len as usize;
        // UTF-8 well-formedness.
        let need = match d {
            0x00..=0x7f => {
                if c.pending != 0 {
                    return false;
                }
                0
            }
            0x80..=0xbf => {
                if c.pending == 0 {
                    return false;
                }
                c.pending -= 1;
                0
            }
            0xc2..=0xdf => 1,
            0xe0..=0xef => 2,
            0xf0..=0xf4 => 3,
            _ => return false,
        };
        if need > 0 {
            if c.pending != 0 || len + 1 + need as usize > self.max_len(f) {
                return false;
            }
            c.pending = need;
        }
        if len >= self.max_len(f) {
            return false;
        }
        if matches!(f, Field::ESnip | Field::RSnip) && self.cfg.snippet_names {
            let (a, b) = self.required_names(c, f);
            if let Some((p, fail)) = a {
                c.m1 = kmp_step(p, fail, c.m1, d);
            }
            if let Some((p, fail)) = b {
                c.m2 = kmp_step(p, fail, c.m2, d);
            }
        }
        if matches!(f, Field::Name | Field::Desc | Field::ESnip | Field::RSnip)
            && self.cfg.one_sentence
        {
            // Whitespace after a sentence end: the string must close instead, once it could
            // (long enough, holding its names); until then it may run on rather than get stuck.
            let ws = matches!(d, b' ' | b'\n' | b'\t' | b'\r');
            let could_close = len >= self.min_len(f) && self.names_found(c, f);
            if c.sentence_end == 1 && ws && (could_close || f == Field::Name) {
                return false;
            }
            c.sentence_end = u8::from(matches!(d, b'.' | b'!' | b'?'));
        }
        if f == Field::Name && d == b' ' {
            if c.spaces >= MAX_NAME_SPACES {
                return false;
            }
            c.spaces += 1;
        }
        if f == Field::Name && c.nlo < c.nhi {
            let names = &self.names;
            let key = |i: usize| names[i].get(len).copied();
            let (lo, hi) = narrow(c.nlo as usize, c.nhi as usize, d, key);
            c.nlo = lo as u32;
            c.nhi = hi as u32;
        }
        // Field character rules.
        let char_ok = match f {
            Field::Type if self.types.is_empty() => d.is_ascii_lowercase() || d == b'_',
            Field::Pred => d.is_ascii_lowercase() || (len > 0 && d == b'_'),
            Field::Name | Field::Subj | Field::Obj => {
                !(d == b'"' || d == b'\\' || d < 0x20)
                    && (len > 0 || d.is_ascii_alphanumeric() || d >= 0x80)
            }
            _ => true,
        };
        if !char_ok {
            return false;
        }
        match self.rule(f) {
            Rule::Options(opts) => {
                let key = |i: usize| opts[i].get(len).copied();
                let (lo, hi) = narrow(c.lo as usize, c.hi as usize, d, key);
                if lo >= hi {
                    return false;
                }
                c.lo = lo as u32;
                c.hi = hi as u32;
            }
            Rule::Source => {
                // A snippet may not start inside a UTF-8 character.
                if len == 0 && (0x80..=0xbf).contains(&d) {
                    return false;
                }
                let key = |i: usize| self.src.get(self.sa[i] as usize + len).copied();
                let (lo, hi) = narrow(c.lo as usize, c.hi as usize, d, key);
                if lo >= hi {
                    return false;
                }
                c.lo = lo as u32;
                c.hi = hi as u32;
            }
            Rule::Free => {}
        }
        c.len += 1;
        true
    }
}

/// The KMP failure table of `p`: for each prefix length i+1, the length of its longest proper
/// border.
fn kmp_fail(p: &[u8]) -> Vec<u16> {
    let mut fail = vec![0u16; p.len()];
    let mut k = 0usize;
    for i in 1..p.len() {
        while k > 0 && p[i] != p[k] {
            k = fail[k - 1] as usize;
        }
        if p[i] == p[k] {
            k += 1;
        }
        fail[i] = k as u16;
    }
    fail
}

/// Advance a KMP match of `p` by one byte; a complete match stays complete.
fn kmp_step(p: &[u8], fail: &[u16], m: u16, b: u8) -> u16 {
    let mut m = m as usize;
    if m >= p.len() {
        return m as u16;
    }
    while m > 0 && p[m] != b {
        m = fail[m - 1] as usize;
    }
    if p[m] == b {
        m += 1;
    }
    m as u16
}

/// Within `lo..hi` of a list sorted so that `key(i)` (the byte at the current depth, `None`
/// when the entry is shorter) is non-decreasing, the sub-range whose key is `Some(d)`.
fn narrow(lo: usize, hi: usize, d: u8, key: impl Fn(usize) -> Option<u8>) -> (usize, usize) {
    let first = lo + partition(hi - lo, |k| key(lo + k) < Some(d));
    let last = first + partition(hi - first, |k| key(first + k) <= Some(d));
    (first, last)
}

/// The first index in `0..n` where `pred` turns false (pred is true then false).
fn partition(n: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0usize, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const SRC: &str =
        "Acme Robotics is based in Berlin. Jane \"JD\" Doe leads Acme Robotics.\nZürich café.";

    fn g() -> JsonGrammar {
        JsonGrammar::new(GrammarConfig::default(), SRC)
    }

    const VALID: &str = concat!(
        r#"{"entities":[{"type":"organization","name":"Acme Robotics","description":"Robotics","snippet":"Acme Robotics is based in Berlin."},"#,
        r#"{"type":"place","name":"Berlin","description":"","snippet":"based in Berlin"},"#,
        r#"{"type":"person","name":"Jane","description":"Jane \"JD\" Doe","snippet":"Jane \"JD\" Doe leads"},"#,
        r#"{"type":"place","name":"Zürich","description":"","snippet":"Zürich café."}],"#,
        r#""relations":[{"subject":"Acme Robotics","predicate":"located_in","object":"Berlin","snippet":"Acme Robotics is based in Berlin."},"#,
        r#"{"subject":"Jane","predicate":"leads","object":"Acme Robotics","snippet":"Jane \"JD\" Doe leads Acme Robotics."}]}"#
    );

    #[test]
    fn accepts_valid_documents_and_they_validate() {
        for doc in [VALID, r#"{"entities":[],"relations":[]}"#] {
            let mut gr = g();
            for (i, b) in doc.bytes().enumerate() {
                assert!(gr.advance(&[b]), "stuck at {:?}", &doc[..=i]);
            }
            assert!(gr.is_done());
            assert_eq!(gr.finish(), doc);
            crate::reply::validate(doc, SRC).unwrap();
        }
    }

    #[test]
    fn accepts_byte_by_byte_and_in_odd_chunks() {
        let mut gr = g();
        for b in VALID.as_bytes() {
            assert!(
                gr.advance(&[*b]),
                "at {:?}",
                String::from_utf8_lossy(gr.output())
            );
        }
        assert!(gr.is_done());
        let mut gr = g();
        for chunk in VALID.as_bytes().chunks(7) {
            assert!(gr.advance(chunk));
        }
        assert!(gr.is_done());
    }

    fn rejects_after(prefix: &str, next: &str) {
        let mut gr = g();
        assert!(gr.advance(prefix.as_bytes()), "prefix {prefix:?}");
        assert!(
            !gr.accepts(next.as_bytes()),
            "{prefix:?} + {next:?} was accepted"
        );
        let before = gr.output().to_vec();
        assert!(!gr.advance(next.as_bytes()));
        assert_eq!(gr.output(), before.as_slice());
    }

    #[test]
    fn rejects_invalid_prefixes() {
        let e = r#"{"entities":[{"type":"#;
        rejects_after("", " ");
        rejects_after("", "[");
        rejects_after("{", " \"entities\"");
        rejects_after(r#"{"entities":"#, "{");
        rejects_after(r#"{"entities":["#, ",");
        // Types outside the list.
        rejects_after(e, r#""animal""#);
        rejects_after(e, r#""Person""#);
        // Name rules: non-empty, starts alphanumeric, from the source.
        let n = r#"{"entities":[{"type":"person","name":"#;
        rejects_after(n, r#""""#);
        rejects_after(n, r#"" Jane"#);
        rejects_after(n, r#""Janet"#);
        rejects_after(n, r#""Jane\""#);
        // Snippets must be verbatim and non-empty.
        let s = r#"{"entities":[{"type":"person","name":"Jane","description":"","snippet":"#;
        rejects_after(s, r#""""#);
        rejects_after(s, r#""Jane Doe"#);
        rejects_after(s, r#""jane"#);
        rejects_after(s, r#""Jane \"JD\" Doe\u"#);
        // Keys in order, no extra fields.
        rejects_after(r#"{"entities":[{"type":"person","#, r#""snippet""#);
        rejects_after(
            r#"{"entities":[{"type":"person","name":"Jane","description":"","snippet":"Jane \"JD\" Doe"}"#,
            ",\"x\"",
        );
        // Relations only between emitted names, predicates lower_snake_case.
        let r = r#"{"entities":[{"type":"person","name":"Jane","description":"","snippet":"Jane \"JD\" Doe"}],"relations":[{"subject":"#;
        rejects_after(r, r#""Berlin""#);
        rejects_after(r, r#""Jan""#);
        let p = format!(r#"{r}"Jane","predicate":"#);
        rejects_after(&p, r#""Works"#);
        rejects_after(&p, r#""_x"#);
        rejects_after(&p, r#""""#);
        // Nothing after the end.
        rejects_after(r#"{"entities":[],"relations":[]}"#, " ");
        // Control tokens (empty bytes) are never accepted.
        assert!(!g().accepts(b""));
    }

    #[test]
    fn relations_need_entities() {
        rejects_after(r#"{"entities":[],"relations":["#, "{");
    }

    #[test]
    fn utf8_is_kept_whole() {
        let n = r#"{"entities":[{"type":"place","name":"Z"#;
        let mut gr = g();
        assert!(gr.advance(n.as_bytes()));
        // The first byte of "ü" alone: accepted, but the string cannot close until the
        // character is complete.
        assert!(gr.advance(&[0xc3]));
        assert!(!gr.accepts(b"\""));
        assert!(gr.advance(&[0xbc]));
        assert!(gr.advance(b"rich\""));
        // A snippet cannot start with a continuation byte.
        let mut gr = g();
        assert!(gr.advance(
            r#"{"entities":[{"type":"place","name":"Zürich","description":"","snippet":""#
                .as_bytes()
        ));
        assert!(!gr.accepts(&[0xbc]));
    }

    #[test]
    fn caps_force_closing() {
        let cfg = GrammarConfig {
            max_entities: 2,
            max_relations: 1,
            ..GrammarConfig::default()
        };
        let mut gr = JsonGrammar::new(cfg, SRC);
        let two = r#"{"entities":[{"type":"place","name":"Berlin","description":"","snippet":"based in Berlin"},{"type":"person","name":"Jane","description":"","snippet":"Jane \"JD\" Doe"}"#;
        assert!(gr.advance(two.as_bytes()));
        assert!(!gr.accepts(b","));
        // Names end at word boundaries.
        let mut g2 = g();
        assert!(g2.advance(br#"{"entities":[{"type":"place","name":"#));
        assert!(!g2.accepts(br#""Berl""#));
        assert!(g2.accepts(br#""Berlin""#));
        assert!(gr.advance(br#"],"relations":[{"subject":"Berlin","predicate":"is","object":"Jane","snippet":"Berlin. Jane"}"#));
        assert!(!gr.accepts(b","));
        assert!(gr.advance(b"]}"));
        // Field length caps: the string must close at the cap.
        let cfg = GrammarConfig {
            max_description: 3,
            ..GrammarConfig::default()
        };
        let mut gr = JsonGrammar::new(cfg, SRC);
        assert!(gr.advance(br#"{"entities":[{"type":"place","name":"Berlin","description":"Acm"#));
        assert!(!gr.accepts(b"e"));
        assert!(gr.accepts(b"\""));
    }

    #[test]
    fn finish_closes_at_the_last_complete_item() {
        let mut gr = g();
        assert_eq!(gr.finish(), EMPTY);
        assert!(gr.advance(br#"{"entities":[{"type":"place","name":"Berlin","description":"","snippet":"based in Berlin"},{"type":"pers"#));
        let out = gr.finish();
        assert_eq!(
            out,
            r#"{"entities":[{"type":"place","name":"Berlin","description":"","snippet":"based in Berlin"}],"relations":[]}"#
        );
        crate::reply::validate(&out, SRC).unwrap();
        assert!(gr.advance(br#"on","name":"Jane","description":"","snippet":"Jane \"JD\" Doe"}],"relations":[{"subject":"Jane","predicate":"lea"#));
        let out = gr.finish();
        assert!(
            out.ends_with(r#""snippet":"Jane \"JD\" Doe"}],"relations":[]}"#),
            "{out}"
        );
        crate::reply::validate(&out, SRC).unwrap();
    }

    #[test]
    fn relation_snippets_hold_both_names() {
        let mut gr = g();
        assert!(gr.advance(br#"{"entities":[{"type":"organization","name":"Acme Robotics","description":"","snippet":"Acme Robotics is based in Berlin."},{"type":"place","name":"Berlin","description":"","snippet":"based in Berlin"}],"relations":[{"subject":"Acme Robotics","predicate":"located_in","object":"Berlin","snippet":""#));
        assert!(!gr.accepts(br#"Doe leads Acme Robotics.""#));
        assert!(!gr.accepts(br#"based in Berlin.""#));
        assert!(gr.accepts(br#"Acme Robotics is based in Berlin.""#));
    }

    #[test]
    fn one_relation_per_pair() {
        let mut gr = g();
        assert!(gr.advance(br#"{"entities":[{"type":"organization","name":"Acme Robotics","description":"","snippet":"Acme Robotics is based in Berlin."},{"type":"place","name":"Berlin","description":"","snippet":"based in Berlin"}],"relations":[{"subject":"Acme Robotics","predicate":"located_in","object":"Berlin","snippet":"Acme Robotics is based in Berlin."},{"subject":"Acme Robotics","predicate":"near","object":"#));
        assert!(!gr.accepts(br#""Berlin""#));
    }

    #[test]
    fn kmp_matches_with_overlaps() {
        let p = b"aab";
        let f = kmp_fail(p);
        let mut m = 0;
        for &b in b"aaab" {
            m = kmp_step(p, &f, m, b);
        }
        assert_eq!(m as usize, p.len());
    }

    #[test]
    fn no_self_relations_and_short_names() {
        let mut gr = g();
        assert!(gr.advance(br#"{"entities":[{"type":"place","name":"Berlin","description":"","snippet":"based in Berlin"},{"type":"person","name":"Jane","description":"","snippet":"Jane \"JD\" Doe"}],"relations":[{"subject":"Berlin","predicate":"near","object":"#));
        assert!(!gr.accepts(br#""Berlin""#));
        assert!(gr.accepts(br#""Jane""#));
        let src = "one two three four five six seven eight";
        let mut gr = JsonGrammar::new(GrammarConfig::default(), src);
        assert!(
            gr.advance(br#"{"entities":[{"type":"concept","name":"one two three four five six"#)
        );
        assert!(!gr.accepts(b" "));
    }

    #[test]
    fn names_do_not_repeat() {
        let mut gr = g();
        assert!(gr.advance(br#"{"entities":[{"type":"place","name":"Berlin","description":"","snippet":"based in Berlin"},{"type":"person","name":"#));
        assert!(!gr.accepts(br#""Berlin""#));
        assert!(gr.accepts(br#""Berlin.""#));
        assert!(gr.accepts(br#""Jane""#));
    }

    #[test]
    fn descriptions_are_empty_or_from_the_source() {
        let mut gr = g();
        assert!(gr.advance(br#"{"entities":[{"type":"place","name":"Berlin","description":"#));
        assert!(gr.accepts(br#""","#));
        assert!(!gr.accepts(br#""the capital""#));
        assert!(gr.accepts(br#""is based in Berlin""#));
    }

    #[test]
    fn snippets_stop_at_a_sentence_end_and_have_a_minimum() {
        let mut gr = g();
        assert!(gr.advance(
            br#"{"entities":[{"type":"place","name":"Berlin","description":"","snippet":""#
        ));
        // Too short to close.
        assert!(!gr.accepts(br#"Berlin""#));
        // Past the minimum, a sentence end must close the snippet.
        assert!(gr.accepts(br#"based in Berlin.""#));
        assert!(!gr.accepts(br#"based in Berlin. "#));
        // A short sentence may run on into the next one.
        assert!(gr.accepts(br#"Berlin. Jane""#));
        // The snippet must hold the entity's name.
        assert!(!gr.accepts(br#"Jane \"JD\" Doe leads""#));
        // At the very end of the source a short snippet may close.
        let mut gr = JsonGrammar::new(GrammarConfig::default(), "Acme is in Oslo.");
        assert!(gr.advance(
            br#"{"entities":[{"type":"place","name":"Oslo","description":"","snippet":""#
        ));
        assert!(gr.accepts(br#"Oslo.""#));
        assert!(!gr.accepts(br#"Oslo""#));
    }

    #[test]
    fn unbound_grammar_allows_free_text() {
        let cfg = GrammarConfig {
            source_bound: false,
            types: Vec::new(),
            ..GrammarConfig::default()
        };
        let mut gr = JsonGrammar::new(cfg, "");
        assert!(gr.advance(br#"{"entities":[{"type":"research_lab","name":"Anything","description":"","snippet":"Anything goes here"}],"relations":[]}"#));
        assert!(gr.is_done());
    }

    #[test]
    fn source_without_letters_allows_no_entities() {
        let mut gr = JsonGrammar::new(GrammarConfig::default(), "--- ... ---");
        assert!(!gr.accepts(br#"{"entities":[{"#));
        assert!(gr.advance(br#"{"entities":[],"relations":[]}"#));
        let gr = JsonGrammar::new(GrammarConfig::default(), "...");
        assert!(!gr.accepts(br#"{"entities":[{"#));
    }
}
