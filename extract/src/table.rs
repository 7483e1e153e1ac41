//! Markdown table rendering and a small row/cell accumulator shared by the XML extractors.

/// Makes `s` safe inside a Markdown table cell: one line, `|` escaped, whitespace collapsed.
pub(crate) fn cell_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pending_space = false;
    for c in s.chars() {
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        if c == '|' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Renders rows as a Markdown table: the first row is the header, then a `| --- |` separator,
/// then the rest. Rows are padded to the widest; rows whose cells are all empty are dropped.
/// Returns `None` if nothing is left.
pub(crate) fn markdown(rows: &[Vec<String>]) -> Option<String> {
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| cell_text(c)).collect::<Vec<_>>())
        .filter(|r| r.iter().any(|c| !c.is_empty()))
        .collect();
    let width = rows.iter().map(Vec::len).max()?;
    if width == 0 {
        return None;
    }
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        push_row(&mut out, row.iter().map(String::as_str), width);
        if i == 0 {
            out.push('\n');
            push_row(&mut out, std::iter::repeat_n("---", width), width);
        }
    }
    Some(out)
}

/// Appends `| a | b |` (padded with empty cells to `width`) to `out`.
pub(crate) fn push_row<'a>(out: &mut String, cells: impl Iterator<Item = &'a str>, width: usize) {
    out.push('|');
    let mut n = 0;
    for c in cells.take(width) {
        out.push(' ');
        out.push_str(c);
        out.push_str(" |");
        n += 1;
    }
    for _ in n..width {
        out.push_str("  |");
    }
}

/// A table being read from a document: rows of cells, each cell's text accumulated as
/// paragraphs are closed inside it.
#[derive(Debug, Default)]
pub(crate) struct TableBuilder {
    rows: Vec<Vec<String>>,
    row: Option<Vec<String>>,
    cell: Option<String>,
    span: usize,
}

impl TableBuilder {
    pub(crate) fn start_row(&mut self) {
        self.end_row();
        self.row = Some(Vec::new());
    }

    pub(crate) fn end_row(&mut self) {
        self.end_cell();
        if let Some(row) = self.row.take() {
            self.rows.push(row);
        }
    }

    pub(crate) fn start_cell(&mut self) {
        self.end_cell();
        if self.row.is_none() {
            self.row = Some(Vec::new());
        }
        self.cell = Some(String::new());
        self.span = 1;
    }

    /// The current cell spans `n` grid columns (it is padded with `n - 1` empty cells).
    pub(crate) fn set_span(&mut self, n: usize) {
        self.span = n.clamp(1, 1000);
    }

    pub(crate) fn end_cell(&mut self) {
        if let Some(cell) = self.cell.take() {
            let row = self.row.get_or_insert_with(Vec::new);
            row.push(cell);
            for _ in 1..self.span {
                row.push(String::new());
            }
            self.span = 1;
        }
    }

    pub(crate) fn in_cell(&self) -> bool {
        self.cell.is_some()
    }

    /// Adds text (a closed paragraph, a nested table's text) to the open cell, space-separated.
    pub(crate) fn add_to_cell(&mut self, text: &str) {
        let text = text.trim();
        if text.is_empty() {
            return;
        }
        if let Some(cell) = self.cell.as_mut() {
            if !cell.is_empty() {
                cell.push(' ');
            }
            cell.push_str(text);
        }
    }

    pub(crate) fn finish(mut self) -> Vec<Vec<String>> {
        self.end_row();
        self.rows
    }
}

/// Flattens a table into one line of text (for a table nested inside another table's cell).
pub(crate) fn flatten(rows: &[Vec<String>]) -> String {
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|c| c.trim())
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|r| !r.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[&[&str]]) -> Vec<Vec<String>> {
        v.iter()
            .map(|r| r.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    #[test]
    fn renders_header_separator_rows() {
        let t = markdown(&rows(&[&["A", "B"], &["1", "2"], &["3"]]));
        assert_eq!(
            t.as_deref(),
            Some("| A | B |\n| --- | --- |\n| 1 | 2 |\n| 3 |  |")
        );
    }

    #[test]
    fn escapes_pipes_and_newlines() {
        assert_eq!(cell_text(" a|b\n c  "), "a\\|b c");
    }

    #[test]
    fn empty_tables_render_nothing() {
        assert_eq!(markdown(&[]), None);
        assert_eq!(markdown(&rows(&[&["", " "]])), None);
    }

    #[test]
    fn builder_pads_spans() {
        let mut t = TableBuilder::default();
        t.start_row();
        t.start_cell();
        t.add_to_cell("wide");
        t.set_span(2);
        t.end_cell();
        t.end_row();
        t.start_row();
        t.start_cell();
        t.add_to_cell("a");
        t.start_cell();
        t.add_to_cell("b");
        assert_eq!(t.finish(), rows(&[&["wide", ""], &["a", "b"]]));
    }
}
