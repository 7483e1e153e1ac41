//! The structural chunker: turns extracted text into retrievable chunks that carry the section
//! heading and page they came from.
//!
//! Two passes, after seed 004's `StructuralChunker`:
//!
//! 1. **Sections.** A line-by-line scan. A line `[Page N]` sets the page in effect (the marker
//!    line itself is metadata and does not appear in any chunk's content) and, when the page
//!    changes, closes the current section and continues it (same heading) on the new page:
//!    DESIGN.md §4 splits at page markers as well as headings (the seed only tracked pages),
//!    so a chunk never spans pages and its page citation is exact. A line matching
//!    `^#{1,6}\s+(.+)$` is a heading: it closes the current section and opens a new one whose
//!    `section` is the heading text (without the `#`s, and without a closing run of `#`s) and
//!    whose content starts with the heading line itself, so headings stay searchable. Lines
//!    inside fenced code blocks (```` ``` ```` or `~~~`) are never headings. The text before the
//!    first heading is a section with no heading. Sections with only blank lines are dropped.
//! 2. **Splitting with overlap.** A section of at most `chunk_size` characters is one chunk (its
//!    text, leading and trailing blank lines removed). A longer one is split into paragraphs
//!    (runs of non-blank lines); paragraphs accumulate into a chunk (joined by a blank line) until
//!    the next one would take it past `chunk_size`; the chunk is then flushed and the next one is
//!    primed with the trailing paragraphs of the flushed chunk whose combined length fits within
//!    `chunk_overlap` (dropping the oldest of them if they and the next paragraph would not fit
//!    in `chunk_size`). A paragraph longer than `chunk_size` is first hard-split on line
//!    boundaries, and a single line longer than `chunk_size` at character boundaries (never
//!    inside a UTF-8 sequence).
//!
//! Sizes are in characters (Unicode scalar values), not bytes. Every chunk is at most
//! `chunk_size` characters, is never empty or blank, and has the page in effect at its first
//! line. Indexes run 0, 1, 2… in document order. `\r\n` line ends are accepted.

/// Chunk sizes, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkConfig {
    /// Largest chunk, in characters (0 is treated as 1).
    pub chunk_size: usize,
    /// Most characters of trailing paragraphs repeated at the start of the next chunk of a
    /// split section.
    pub chunk_overlap: usize,
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            chunk_size: 1500,
            chunk_overlap: 200,
        }
    }
}

/// One retrievable piece of a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// The chunk's text.
    pub content: String,
    /// The heading of the section it belongs to, if any.
    pub section: Option<String>,
    /// The page in effect where the chunk starts (from `[Page N]` markers), if any.
    pub page: Option<u32>,
    /// Position in the document, from 0.
    pub index: usize,
}

/// Splits `text` into chunks. See the module docs for the rules.
pub fn chunk(text: &str, cfg: &ChunkConfig) -> Vec<Chunk> {
    let size = cfg.chunk_size.max(1);
    let mut chunks: Vec<Chunk> = Vec::new();
    for section in split_sections(text) {
        for (content, page) in split_section(&section.lines, size, cfg.chunk_overlap) {
            chunks.push(Chunk {
                content,
                section: section.heading.clone(),
                page,
                index: chunks.len(),
            });
        }
    }
    chunks
}

#[derive(Debug, Clone, Copy)]
struct Line<'a> {
    text: &'a str,
    page: Option<u32>,
}

#[derive(Debug)]
struct Section<'a> {
    heading: Option<String>,
    lines: Vec<Line<'a>>,
}

impl Section<'_> {
    fn has_content(&self) -> bool {
        self.lines.iter().any(|l| !l.text.trim().is_empty())
    }
}

/// `[Page N]` (surrounding whitespace allowed) → N.
fn page_marker(line: &str) -> Option<u32> {
    let inner = line.trim().strip_prefix("[Page ")?.strip_suffix(']')?;
    if inner.is_empty() || !inner.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    inner.parse().ok()
}

/// `^#{1,6}\s+(.+)$` → the heading text, trimmed, without a closing `#` run.
fn heading(line: &str) -> Option<String> {
    let hashes = line.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &line[hashes..];
    if !rest.starts_with(char::is_whitespace) {
        return None;
    }
    let mut text = rest.trim();
    // A closing sequence: spaces then only `#`s ("## Title ##").
    let without = text.trim_end_matches('#');
    if without.len() < text.len() && (without.is_empty() || without.ends_with(char::is_whitespace))
    {
        text = without.trim_end();
    }
    (!text.is_empty()).then(|| text.to_string())
}

/// A code fence opener/closer: up to three spaces, then three or more backticks or tildes.
fn fence(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    if indent > 3 {
        return None;
    }
    let rest = &line[indent..];
    let c = rest.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let n = rest.chars().take_while(|x| *x == c).count();
    (n >= 3).then_some((c, n))
}

fn split_sections(text: &str) -> Vec<Section<'_>> {
    let mut sections = Vec::new();
    let mut current = Section {
        heading: None,
        lines: Vec::new(),
    };
    let mut page: Option<u32> = None;
    let mut open_fence: Option<(char, usize)> = None;
    for raw in text.split('\n') {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if let Some(n) = page_marker(line) {
            // DESIGN.md §4: sections split at page markers too, so every chunk lies on one
            // page and cites it exactly. The heading carries over to the next page's part.
            if page.is_some_and(|p| p != n) && open_fence.is_none() {
                let heading = current.heading.clone();
                let done = std::mem::replace(
                    &mut current,
                    Section {
                        heading,
                        lines: Vec::new(),
                    },
                );
                if done.has_content() {
                    sections.push(done);
                }
            }
            page = Some(n);
            continue;
        }
        match (open_fence, fence(line)) {
            (None, Some(f)) => open_fence = Some(f),
            (Some((c, n)), Some((c2, n2)))
                if c == c2 && n2 >= n && line.trim().chars().all(|x| x == c) =>
            {
                open_fence = None
            }
            (None, None) => {
                if let Some(h) = heading(line) {
                    let done = std::mem::replace(
                        &mut current,
                        Section {
                            heading: Some(h),
                            lines: Vec::new(),
                        },
                    );
                    if done.has_content() {
                        sections.push(done);
                    }
                }
            }
            _ => {}
        }
        current.lines.push(Line { text: line, page });
    }
    if current.has_content() {
        sections.push(current);
    }
    sections
}

/// A piece of a section that is never split further: a paragraph, or a piece of one.
#[derive(Debug)]
struct Unit {
    text: String,
    chars: usize,
    page: Option<u32>,
}

impl Unit {
    fn new(text: String, page: Option<u32>) -> Unit {
        let chars = text.chars().count();
        Unit { text, chars, page }
    }
}

const SEP: usize = 2; // "\n\n" between units of one chunk

fn split_section(lines: &[Line<'_>], size: usize, overlap: usize) -> Vec<(String, Option<u32>)> {
    let Some(first) = lines.iter().position(|l| !l.text.trim().is_empty()) else {
        return Vec::new();
    };
    let last = lines
        .iter()
        .rposition(|l| !l.text.trim().is_empty())
        .unwrap_or(first);
    let lines = &lines[first..=last];
    let whole = lines.iter().map(|l| l.text).collect::<Vec<_>>().join("\n");
    if whole.chars().count() <= size {
        return vec![(whole, lines[0].page)];
    }

    let mut units = Vec::new();
    for para in lines
        .split(|l| l.text.trim().is_empty())
        .filter(|p| !p.is_empty())
    {
        let text = para.iter().map(|l| l.text).collect::<Vec<_>>().join("\n");
        let unit = Unit::new(text, para[0].page);
        if unit.chars <= size {
            units.push(unit);
        } else {
            hard_split(para, size, &mut units);
        }
    }
    units.retain(|u| !u.text.trim().is_empty());

    let mut out = Vec::new();
    let mut current: Vec<&Unit> = Vec::new();
    let mut len = 0usize;
    for unit in &units {
        if !current.is_empty() && len + SEP + unit.chars > size {
            out.push(render(&current));
            // Prime the next chunk with the trailing units that fit within the overlap…
            let mut keep: Vec<&Unit> = Vec::new();
            let mut kept = 0usize;
            for u in current.iter().rev() {
                let add = u.chars + if keep.is_empty() { 0 } else { SEP };
                if kept + add > overlap {
                    break;
                }
                kept += add;
                keep.push(u);
            }
            keep.reverse();
            // …as long as the new unit still fits after them.
            while !keep.is_empty() && kept + SEP + unit.chars > size {
                let dropped = keep.remove(0);
                kept -= dropped.chars + if keep.is_empty() { 0 } else { SEP };
            }
            current = keep;
            len = kept;
        }
        len += unit.chars + if current.is_empty() { 0 } else { SEP };
        current.push(unit);
    }
    if !current.is_empty() {
        out.push(render(&current));
    }
    out
}

fn render(units: &[&Unit]) -> (String, Option<u32>) {
    let text = units
        .iter()
        .map(|u| u.text.as_str())
        .collect::<Vec<_>>()
        .join("\n\n");
    (text, units.first().and_then(|u| u.page))
}

/// Moves a non-empty piece into `units`.
fn flush(piece: &mut String, chars: &mut usize, page: Option<u32>, units: &mut Vec<Unit>) {
    if !piece.is_empty() {
        units.push(Unit {
            text: std::mem::take(piece),
            chars: *chars,
            page,
        });
        *chars = 0;
    }
}

/// Splits an oversized paragraph on line boundaries, and oversized lines at char boundaries.
fn hard_split(para: &[Line<'_>], size: usize, units: &mut Vec<Unit>) {
    let mut piece = String::new();
    let mut piece_chars = 0usize;
    let mut piece_page = None;
    for line in para {
        let n = line.text.chars().count();
        if n > size {
            flush(&mut piece, &mut piece_chars, piece_page, units);
            let mut start = 0usize;
            let mut count = 0usize;
            for (i, _) in line.text.char_indices() {
                if count == size {
                    units.push(Unit::new(line.text[start..i].to_string(), line.page));
                    start = i;
                    count = 0;
                }
                count += 1;
            }
            if start < line.text.len() {
                units.push(Unit::new(line.text[start..].to_string(), line.page));
            }
            continue;
        }
        let add = if piece.is_empty() { n } else { n + 1 };
        if !piece.is_empty() && piece_chars + add > size {
            flush(&mut piece, &mut piece_chars, piece_page, units);
        }
        if piece.is_empty() {
            piece_page = line.page;
            piece.push_str(line.text);
            piece_chars = n;
        } else {
            piece.push('\n');
            piece.push_str(line.text);
            piece_chars += n + 1;
        }
    }
    flush(&mut piece, &mut piece_chars, piece_page, units);
}

/// The inverse of [`chunk`]'s overlap: consecutive chunks of one section share their overlap
/// paragraphs; the repeat is dropped, so each paragraph reads once. Chunks of different
/// sections are left alone (the chunker never overlaps across a heading).
pub fn dedupe_overlap(chunks: Vec<(Option<String>, String)>) -> Vec<(Option<String>, String)> {
    let mut out: Vec<(Option<String>, String)> = Vec::with_capacity(chunks.len());
    for (section, content) in chunks {
        let trimmed = match out.last() {
            Some((prev_section, prev)) if *prev_section == section => {
                let paras: Vec<&str> = prev.split("\n\n").collect();
                let mut cut = 0;
                for k in (1..=paras.len()).rev() {
                    let tail = paras[paras.len() - k..].join("\n\n");
                    if content.starts_with(&tail) && tail.len() < content.len() {
                        cut = tail.len();
                        break;
                    }
                }
                content[cut..].trim_start_matches('\n').to_owned()
            }
            _ => content,
        };
        out.push((section, trimmed));
    }
    out
}

/// A document version's text from its chunks in order (section, content): the overlap
/// between neighbours removed, empty pieces dropped, joined by blank lines. This is the text
/// the knowledge-graph extractor reads.
pub fn text_of_chunks(chunks: Vec<(Option<String>, String)>) -> String {
    dedupe_overlap(chunks)
        .into_iter()
        .map(|(_, c)| c)
        .filter(|c| !c.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn cfg(size: usize, overlap: usize) -> ChunkConfig {
        ChunkConfig {
            chunk_size: size,
            chunk_overlap: overlap,
        }
    }

    fn contents(chunks: &[Chunk]) -> Vec<&str> {
        chunks.iter().map(|c| c.content.as_str()).collect()
    }

    fn assert_invariants(chunks: &[Chunk], size: usize) {
        for (i, c) in chunks.iter().enumerate() {
            assert_eq!(c.index, i, "indexes run in order");
            assert!(!c.content.trim().is_empty(), "no blank chunk");
            assert!(
                c.content.chars().count() <= size,
                "chunk {i} has {} chars > {size}",
                c.content.chars().count()
            );
        }
    }

    #[test]
    fn defaults_match_the_seed() {
        assert_eq!(cfg(1500, 200), ChunkConfig::default());
    }

    #[test]
    fn empty_and_blank_text_give_no_chunks() {
        assert!(chunk("", &ChunkConfig::default()).is_empty());
        assert!(chunk(" \n\n\t\n", &ChunkConfig::default()).is_empty());
        assert!(chunk("[Page 1]\n\n[Page 2]\n", &ChunkConfig::default()).is_empty());
    }

    #[test]
    fn text_without_headings_is_one_section() {
        let c = chunk(
            "\n\nfirst line\nsecond\n\nthird\n\n",
            &ChunkConfig::default(),
        );
        assert_eq!(contents(&c), vec!["first line\nsecond\n\nthird"]);
        assert_eq!(c[0].section, None);
        assert_eq!(c[0].page, None);
        assert_eq!(c[0].index, 0);
    }

    #[test]
    fn headings_open_sections() {
        let text =
            "intro\n# One\nalpha\n## Two ##\nbeta\n####### not a heading\n#nospace\n### C#\n";
        let c = chunk(text, &ChunkConfig::default());
        assert_eq!(
            contents(&c),
            vec![
                "intro",
                "# One\nalpha",
                "## Two ##\nbeta\n####### not a heading\n#nospace",
                "### C#"
            ]
        );
        let sections: Vec<_> = c.iter().map(|c| c.section.as_deref()).collect();
        assert_eq!(sections, vec![None, Some("One"), Some("Two"), Some("C#")]);
    }

    #[test]
    fn heading_only_sections_are_kept() {
        let c = chunk("# Title\n\n## Empty\n   \n", &ChunkConfig::default());
        assert_eq!(contents(&c), vec!["# Title", "## Empty"]);
        assert_eq!(c[1].section.as_deref(), Some("Empty"));
        // "#" followed by blanks only is not a heading.
        assert_eq!(heading("#   "), None);
        assert_eq!(heading("#\tTabbed"), Some("Tabbed".to_string()));
    }

    #[test]
    fn headings_inside_code_fences_are_text() {
        let text =
            "# Setup\n```sh\n# install it\nmake\n```\nafter\n~~~\n## still code\n~~~\n# Next\nx";
        let c = chunk(text, &ChunkConfig::default());
        let sections: Vec<_> = c.iter().map(|c| c.section.as_deref()).collect();
        assert_eq!(sections, vec![Some("Setup"), Some("Next")]);
        assert!(c[0].content.contains("# install it"));
        assert!(c[0].content.contains("## still code"));
    }

    #[test]
    fn page_markers_set_pages_and_are_not_content() {
        let text = "[Page 1]\n\n# Intro\n\nstart\n\n[Page 2]\n\nmore intro\n\n# Later\n\nend\n\n[Page 3]\n";
        let c = chunk(text, &ChunkConfig::default());
        assert_eq!(
            contents(&c),
            vec!["# Intro\n\nstart", "more intro", "# Later\n\nend"]
        );
        let pages: Vec<_> = c.iter().map(|c| c.page).collect();
        assert_eq!(pages, vec![Some(1), Some(2), Some(2)]);
        assert_eq!(
            c[1].section.as_deref(),
            Some("Intro"),
            "the section continues on page 2"
        );
        assert!(!c.iter().any(|c| c.content.contains("[Page")));
    }

    #[test]
    fn page_of_a_split_chunk_is_where_it_starts() {
        let text =
            "[Page 1]\n\naaaa aaaa\n\n[Page 2]\n\nbbbb bbbb\n\ncccc cccc\n\n[Page 3]\n\ndddd dddd";
        let c = chunk(text, &cfg(20, 0));
        assert_invariants(&c, 20);
        assert_eq!(
            contents(&c),
            vec!["aaaa aaaa", "bbbb bbbb\n\ncccc cccc", "dddd dddd"]
        );
        // Chunks never span pages.
        let pages: Vec<_> = c.iter().map(|c| c.page).collect();
        assert_eq!(pages, vec![Some(1), Some(2), Some(3)]);
        // Not markers: wrong shape, or not alone on the line.
        assert_eq!(page_marker("[Page two]"), None);
        assert_eq!(page_marker("see [Page 2]"), None);
        assert_eq!(page_marker("  [Page 12]  "), Some(12));
    }

    #[test]
    fn overlap_repeats_trailing_paragraphs_that_fit() {
        // Paragraphs of 10 chars; chunks of at most 34 chars hold three (10+2+10+2+10).
        let paras: Vec<String> = (0..7).map(|i| format!("para{i}-xxxx")).collect();
        let text = paras.join("\n\n");
        let c = chunk(&text, &cfg(34, 12));
        assert_invariants(&c, 34);
        assert_eq!(
            contents(&c),
            vec![
                "para0-xxxx\n\npara1-xxxx\n\npara2-xxxx",
                "para2-xxxx\n\npara3-xxxx\n\npara4-xxxx",
                "para4-xxxx\n\npara5-xxxx\n\npara6-xxxx",
            ]
        );
        // Overlap 22 fits two trailing paragraphs, and the next one still fits after them.
        let c = chunk(&text, &cfg(34, 22));
        assert_invariants(&c, 34);
        assert_eq!(c[1].content, "para1-xxxx\n\npara2-xxxx\n\npara3-xxxx");
        // With chunks of 33, two kept paragraphs leave no room: the oldest is dropped.
        let c = chunk(&text, &cfg(33, 22));
        assert_invariants(&c, 33);
        assert_eq!(
            contents(&c)[..3],
            [
                "para0-xxxx\n\npara1-xxxx",
                "para1-xxxx\n\npara2-xxxx",
                "para2-xxxx\n\npara3-xxxx"
            ]
        );
        // No overlap: every paragraph exactly once.
        let c = chunk(&text, &cfg(34, 0));
        let joined = contents(&c).join("\n\n");
        assert_eq!(joined, text);
    }

    #[test]
    fn split_chunks_keep_the_section() {
        let body: Vec<String> = (0..20).map(|i| format!("sentence number {i}.")).collect();
        let text = format!("# Big\n\n{}\n\n# Small\n\nx", body.join("\n\n"));
        let c = chunk(&text, &cfg(100, 30));
        assert_invariants(&c, 100);
        assert!(c.len() > 3);
        assert!(c[0].content.starts_with("# Big"));
        let last = c.last().unwrap();
        assert_eq!(last.section.as_deref(), Some("Small"));
        assert!(c[..c.len() - 1]
            .iter()
            .all(|c| c.section.as_deref() == Some("Big")));
    }

    #[test]
    fn oversized_paragraph_splits_on_lines() {
        let lines: Vec<String> = (0..10).map(|i| format!("line {i} of the block")).collect(); // 19-20 chars
        let text = lines.join("\n");
        let c = chunk(&text, &cfg(45, 0));
        assert_invariants(&c, 45);
        for ch in &c {
            for l in ch.content.lines() {
                assert!(lines.contains(&l.to_string()), "lines are never cut: {l:?}");
            }
        }
        let rejoined: Vec<&str> = c.iter().flat_map(|c| c.content.lines()).collect();
        assert_eq!(
            rejoined,
            lines.iter().map(String::as_str).collect::<Vec<_>>()
        );
    }

    #[test]
    fn oversized_line_splits_at_char_boundaries() {
        let line = "abcdefghij".repeat(5); // 50 chars, one line
        let c = chunk(&format!("intro\n\n{line}"), &cfg(16, 0));
        assert_invariants(&c, 16);
        let pieces: String = c.iter().skip(1).map(|c| c.content.as_str()).collect();
        assert_eq!(pieces, line);
        assert_eq!(c[0].content, "intro");
    }

    #[test]
    fn multibyte_text_counts_chars_and_never_splits_inside_one() {
        let line = "日本語のテキスト🙂é".repeat(20); // 200 chars, many more bytes
        let c = chunk(&line, &cfg(7, 3));
        assert_invariants(&c, 7);
        let rejoined: String = c.iter().map(|c| c.content.as_str()).collect();
        assert_eq!(rejoined, line);
        let n = c.len();
        assert!(c
            .iter()
            .all(|ch| ch.content.chars().count() == 7 || ch.index == n - 1));
    }

    #[test]
    fn crlf_input_is_handled() {
        let text = "[Page 4]\r\n# Title\r\n\r\nbody one\r\n\r\n## Next\r\nbody two\r\n";
        let c = chunk(text, &ChunkConfig::default());
        assert_eq!(
            contents(&c),
            vec!["# Title\n\nbody one", "## Next\nbody two"]
        );
        assert_eq!(c[0].section.as_deref(), Some("Title"));
        assert_eq!(c[1].page, Some(4));
        assert!(!c.iter().any(|c| c.content.contains('\r')));
    }

    #[test]
    fn zero_chunk_size_still_terminates() {
        let c = chunk("abc\n\ndef", &cfg(0, 0));
        assert_invariants(&c, 1);
        assert_eq!(contents(&c), vec!["a", "b", "c", "d", "e", "f"]);
    }

    #[test]
    fn overlap_is_removed_once() {
        let s = Some("Intro".to_owned());
        let chunks = vec![
            (s.clone(), "a\n\nb\n\nc".to_owned()),
            (s.clone(), "c\n\nd".to_owned()),
            (Some("Other".into()), "c\n\ne".to_owned()),
        ];
        let out = dedupe_overlap(chunks);
        assert_eq!(out[1].1, "d");
        assert_eq!(out[2].1, "c\n\ne", "no dedupe across sections");
    }
}
