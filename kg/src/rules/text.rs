//! Sentence splitting and word tokenization with byte offsets into the source text.

use super::lexicon::{contains, ABBREVIATIONS};

/// A token: a word (letters/digits with inner `-`, `'`, `.`, `&`), an initial ("Q."), a
/// possessive `'s`, or one punctuation character. Offsets are absolute bytes in the source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tok<'a> {
    pub text: &'a str,
    pub start: usize,
    pub end: usize,
    pub word: bool,
}

impl Tok<'_> {
    /// Capitalized: a word whose first letter is uppercase, or a mixed-case word with an
    /// uppercase letter after a lowercase first one ("iPhone", "eBay").
    pub fn is_cap(&self) -> bool {
        if !self.word {
            return false;
        }
        let mut chars = self.text.chars();
        match chars.next() {
            Some(c) if c.is_uppercase() => true,
            Some(c) if c.is_lowercase() => {
                self.text.chars().count() > 2 && chars.any(char::is_uppercase)
            }
            _ => false,
        }
    }

    /// Lowercase, with periods removed ("Inc." → "inc", "U.S." → "us" is not wanted, so only a
    /// trailing period is removed).
    pub fn lower(&self) -> String {
        self.text.trim_end_matches('.').to_lowercase()
    }
}

fn is_word_char(c: char) -> bool {
    c.is_alphanumeric()
}

/// Split `text[range]` into sentences: at `.`, `!`, `?` (and closing quotes/brackets after
/// them) followed by whitespace and an uppercase letter, digit, quote or bullet; at blank
/// lines; and before bullet or heading lines. Periods after known abbreviations and single
/// capital letters (initials) do not split. Returned ranges are trimmed and non-empty.
pub fn sentences(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0usize;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let n = chars.len();
    let mut i = 0usize;
    while i < n {
        let (b, c) = chars[i];
        let mut cut: Option<(usize, usize)> = None; // (sentence end, next start)
        if c == '\n' {
            // Blank line, or a line starting with a bullet/heading marker.
            let mut j = i + 1;
            while j < n && chars[j].1 != '\n' && chars[j].1.is_whitespace() {
                j += 1;
            }
            if j < n
                && (chars[j].1 == '\n'
                    || starts_line_item(&chars[j..])
                    || text[start..b].trim_start().starts_with('#'))
            {
                cut = Some((b, chars[j].0));
            }
        } else if matches!(c, '.' | '!' | '?' | '…') {
            let mut j = i + 1;
            while j < n
                && matches!(
                    chars[j].1,
                    '.' | '!' | '?' | '"' | '\'' | '”' | '’' | ')' | ']'
                )
            {
                j += 1;
            }
            let end = if j < n { chars[j].0 } else { text.len() };
            if j >= n {
                cut = Some((end, end));
            } else if chars[j].1.is_whitespace() {
                let mut k = j;
                while k < n && chars[k].1.is_whitespace() {
                    k += 1;
                }
                let next_ok = k >= n || {
                    let d = chars[k].1;
                    d.is_uppercase()
                        || d.is_ascii_digit()
                        || matches!(
                            d,
                            '"' | '“' | '\'' | '‘' | '(' | '[' | '-' | '*' | '•' | '#'
                        )
                };
                if next_ok && !(c == '.' && ends_with_abbreviation(&text[start..b])) {
                    cut = Some((end, if k < n { chars[k].0 } else { text.len() }));
                }
            }
        }
        if let Some((end, next)) = cut {
            push_trimmed(text, start, end, &mut out);
            start = next;
            // Continue scanning from `next`.
            while i < n && chars[i].0 < next {
                i += 1;
            }
            continue;
        }
        i += 1;
    }
    push_trimmed(text, start, text.len(), &mut out);
    out
}

fn starts_line_item(rest: &[(usize, char)]) -> bool {
    let c0 = rest.first().map(|x| x.1);
    let c1 = rest.get(1).map(|x| x.1);
    match c0 {
        Some('-' | '*' | '•' | '+') => c1.is_some_and(char::is_whitespace),
        Some('#') => true,
        Some(d) if d.is_ascii_digit() => {
            let mut k = 0;
            while rest.get(k).is_some_and(|x| x.1.is_ascii_digit()) {
                k += 1;
            }
            matches!(rest.get(k).map(|x| x.1), Some('.' | ')'))
                && rest.get(k + 1).is_some_and(|x| x.1.is_whitespace())
        }
        _ => false,
    }
}

fn ends_with_abbreviation(before: &str) -> bool {
    let word: String = before
        .chars()
        .rev()
        .take_while(|c| c.is_alphanumeric() || *c == '.')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    if word.is_empty() {
        return false;
    }
    let mut cs = word.chars();
    // A single capital letter is an initial ("J. Smith").
    if let (Some(c), None) = (cs.next(), cs.next()) {
        if c.is_uppercase() {
            return true;
        }
    }
    contains(ABBREVIATIONS, &word.to_lowercase())
}

fn push_trimmed(text: &str, start: usize, end: usize, out: &mut Vec<(usize, usize)>) {
    if start >= end {
        return;
    }
    let s = &text[start..end];
    let lead = s.len() - s.trim_start().len();
    let trail = s.len() - s.trim_end().len();
    let (a, b) = (start + lead, end - trail);
    if a < b {
        out.push((a, b));
    }
}

/// Tokenize `text[start..end]` (offsets in the returned tokens are absolute).
pub fn tokens(text: &str, start: usize, end: usize) -> Vec<Tok<'_>> {
    let s = &text[start..end];
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let n = chars.len();
    let at = |k: usize| chars.get(k).map(|x| x.1);
    let off = |k: usize| chars.get(k).map_or(s.len(), |x| x.0);
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let c = chars[i].1;
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if is_word_char(c) {
            let mut j = i + 1;
            loop {
                match at(j) {
                    Some(d) if is_word_char(d) => j += 1,
                    Some('-' | '.' | '&' | '\'' | '’')
                        if at(j + 1).is_some_and(is_word_char)
                            // "'s" at the end of a word is a possessive, split off below.
                            && !(matches!(at(j), Some('\'' | '’'))
                                && matches!(at(j + 1), Some('s'))
                                && !at(j + 2).is_some_and(is_word_char)) =>
                    {
                        j += 2
                    }
                    _ => break,
                }
            }
            // An initial: one uppercase letter, a period, a space, then an uppercase letter.
            if j == i + 1
                && c.is_uppercase()
                && at(j) == Some('.')
                && at(j + 1).is_some_and(char::is_whitespace)
                && at(j + 2).is_some_and(char::is_uppercase)
            {
                j += 1;
            }
            out.push(Tok {
                text: &s[off(i)..off(j)],
                start: start + off(i),
                end: start + off(j),
                word: true,
            });
            i = j;
            if matches!(at(i), Some('\'' | '’')) && at(i + 1) == Some('s') {
                out.push(Tok {
                    text: &s[off(i)..off(i + 2)],
                    start: start + off(i),
                    end: start + off(i + 2),
                    word: false,
                });
                i += 2;
            }
            continue;
        }
        out.push(Tok {
            text: &s[off(i)..off(i + 1)],
            start: start + off(i),
            end: start + off(i + 1),
            word: c == '&',
        });
        i += 1;
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn split(t: &str) -> Vec<&str> {
        sentences(t).into_iter().map(|(a, b)| &t[a..b]).collect()
    }

    #[test]
    fn splits_sentences_but_not_abbreviations_or_initials() {
        let t = "Dr. Jane Q. Doe joined Acme Inc. in 2020. She leads it! Does she? Yes.\n\n\
                 # Heading\nText here e.g. this one.\n- bullet one\n- bullet two";
        assert_eq!(
            split(t),
            vec![
                "Dr. Jane Q. Doe joined Acme Inc. in 2020.",
                "She leads it!",
                "Does she?",
                "Yes.",
                "# Heading",
                "Text here e.g. this one.",
                "- bullet one",
                "- bullet two",
            ]
        );
    }

    #[test]
    fn lowercase_after_period_does_not_split() {
        assert_eq!(
            split("Version 2.0 is out. it works."),
            vec!["Version 2.0 is out. it works."]
        );
    }

    #[test]
    fn tokens_keep_offsets_and_split_possessives() {
        let t = "Acme's CEO, Jane Q. Doe (AT&T) co-founded U.S. firms.";
        let toks = tokens(t, 0, t.len());
        let texts: Vec<&str> = toks.iter().map(|t| t.text).collect();
        assert_eq!(
            texts,
            vec![
                "Acme",
                "'s",
                "CEO",
                ",",
                "Jane",
                "Q.",
                "Doe",
                "(",
                "AT&T",
                ")",
                "co-founded",
                "U.S",
                ".",
                "firms",
                "."
            ]
        );
        for tok in &toks {
            assert_eq!(&t[tok.start..tok.end], tok.text);
        }
        assert!(toks[0].is_cap() && !toks[10].is_cap());
    }
}
