//! Schemaless extraction: the document's tables as typed rows, without a model.
//!
//! Cairn's extractors write every table they find as a Markdown table (DOCX, PPTX, HTML,
//! Markdown itself) and every spreadsheet sheet as a `[Sheet: name]` line, a blank line and a
//! Markdown table. [`extract`] reads them back from a document's text: a table is a header
//! row of `|` cells, a `| --- |` separator row, and the rows after it; `\|` inside a cell is a
//! literal bar. Rows of the same width that follow a table after blank lines continue it (a
//! long table is stored in several chunks, and a document's text is its chunks joined by blank
//! lines); a new header and separator start a new table. A table is named by the `[Sheet: …]` line above it, else by the heading of
//! its section (a second table of the section gets ` (2)`), else `table N`; its page is the
//! last `[Page N]` marker before it.
//!
//! Each column gets the narrowest type that every non-empty cell fits, tried in this order:
//! `integer` (`-12`, `1,234`), `number` (`2.5`, `1,234.5`, `-0.5`), `boolean`
//! (`true`/`false`/`yes`/`no`, any case), `date` (`YYYY-MM-DD`), `datetime`
//! (`YYYY-MM-DD HH:MM[:SS]`), else `string`. Cells are converted to that type; empty cells
//! are null. Header names are trimmed; an empty or repeated one becomes `column_N` or
//! `name_2`.

use serde::Serialize;
use serde_json::{Map, Number, Value};

/// A column's measured type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ColumnType {
    Integer,
    Number,
    Boolean,
    Date,
    Datetime,
    String,
    /// Every cell is empty.
    Null,
}

/// A column with its measured type and how many cells are empty.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Column {
    pub name: String,
    #[serde(rename = "type")]
    pub column_type: ColumnType,
    pub nulls: usize,
}

/// One table, typed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Table {
    pub name: String,
    pub page: Option<u32>,
    pub columns: Vec<Column>,
    /// One object per row, keyed by column name, values typed.
    pub rows: Vec<Map<String, Value>>,
}

/// Splits a Markdown table line into cells (`None` if it is not one).
fn cells(line: &str) -> Option<Vec<String>> {
    let t = line.trim();
    let inner = t.strip_prefix('|')?;
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                cur.push('|');
                chars.next();
            }
            '|' => out.push(std::mem::take(&mut cur).trim().to_owned()),
            _ => cur.push(c),
        }
    }
    out.push(cur.trim().to_owned());
    Some(out)
}

fn is_separator(cells: &[String]) -> bool {
    !cells.is_empty()
        && cells.iter().all(|c| {
            let c = c.trim_matches(':');
            c.len() >= 3 && c.chars().all(|x| x == '-')
        })
}

fn page_marker(line: &str) -> Option<u32> {
    line.trim()
        .strip_prefix("[Page ")?
        .strip_suffix(']')?
        .trim()
        .parse()
        .ok()
}

enum Label {
    Sheet(String),
    Heading(String),
}

fn label(line: &str) -> Option<Label> {
    let t = line.trim();
    if let Some(n) = t.strip_prefix("[Sheet: ").and_then(|r| r.strip_suffix(']')) {
        return Some(Label::Sheet(n.trim().to_owned()));
    }
    let h = t.trim_start_matches('#');
    (h.len() < t.len() && h.starts_with(' ')).then(|| Label::Heading(h.trim().to_owned()))
}

/// Every table of `text`, typed (see the module docs).
pub fn extract(text: &str) -> Vec<Table> {
    let lines: Vec<&str> = text.lines().collect();
    let mut tables: Vec<Table> = Vec::new();
    let mut page = None;
    // A `[Sheet: …]` line names the next table; a heading names the tables of its section.
    let mut sheet: Option<String> = None;
    let mut section: Option<String> = None;
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(p) = page_marker(line) {
            page = Some(p);
            i += 1;
            continue;
        }
        let header = cells(line);
        let sep = lines.get(i + 1).and_then(|l| cells(l));
        if let (Some(header), Some(sep)) = (header, sep) {
            if is_separator(&sep) {
                let mut rows = Vec::new();
                let mut j = i + 2;
                loop {
                    while let Some(r) = lines.get(j).and_then(|l| cells(l)) {
                        rows.push(r);
                        j += 1;
                    }
                    // A long table is stored in several chunks, whose text is joined by blank
                    // lines: rows of the same width right after them (not a new table's header
                    // and separator) continue it.
                    let mut k = j;
                    while lines.get(k).is_some_and(|l| l.trim().is_empty()) {
                        k += 1;
                    }
                    let next = lines.get(k).and_then(|l| cells(l));
                    let new_table = lines
                        .get(k + 1)
                        .and_then(|l| cells(l))
                        .is_some_and(|c| is_separator(&c));
                    match next {
                        Some(r) if k > j && r.len() == header.len() && !new_table => j = k,
                        _ => break,
                    }
                }
                let base = sheet
                    .take()
                    .or_else(|| section.clone())
                    .unwrap_or_else(|| format!("table {}", tables.len() + 1));
                let mut name = base.clone();
                let mut n = 2;
                while tables.iter().any(|t| t.name == name) {
                    name = format!("{base} ({n})");
                    n += 1;
                }
                tables.push(typed_table(name, page, header, rows));
                i = j;
                continue;
            }
        }
        match label(line) {
            Some(Label::Sheet(s)) => sheet = Some(s),
            Some(Label::Heading(h)) => {
                section = Some(h);
                sheet = None;
            }
            None => {}
        }
        i += 1;
    }
    tables
}

fn header_names(header: &[String], width: usize) -> Vec<String> {
    let mut names: Vec<String> = Vec::with_capacity(width);
    for k in 0..width {
        let raw = header.get(k).map(|s| s.trim()).unwrap_or_default();
        let base = if raw.is_empty() {
            format!("column_{}", k + 1)
        } else {
            raw.to_owned()
        };
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

fn typed_table(
    name: String,
    page: Option<u32>,
    header: Vec<String>,
    rows: Vec<Vec<String>>,
) -> Table {
    let width = rows
        .iter()
        .map(Vec::len)
        .chain(std::iter::once(header.len()))
        .max()
        .unwrap_or(0);
    let names = header_names(&header, width);
    let mut columns = Vec::with_capacity(width);
    for (k, n) in names.iter().enumerate() {
        let col: Vec<&str> = rows
            .iter()
            .map(|r| r.get(k).map(String::as_str).unwrap_or_default())
            .collect();
        let nulls = col.iter().filter(|c| c.is_empty()).count();
        columns.push(Column {
            name: n.clone(),
            column_type: column_type(&col),
            nulls,
        });
    }
    let rows = rows
        .iter()
        .map(|r| {
            columns
                .iter()
                .enumerate()
                .map(|(k, c)| {
                    let cell = r.get(k).map(String::as_str).unwrap_or_default();
                    (c.name.clone(), convert(cell, c.column_type))
                })
                .collect()
        })
        .collect();
    Table {
        name,
        page,
        columns,
        rows,
    }
}

fn plain_number(s: &str) -> Option<String> {
    let t = s.trim();
    let body = t.strip_prefix('-').unwrap_or(t);
    if body.is_empty() || !body.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    // Thousands separators only between groups of three digits.
    let int_part = body.split('.').next().unwrap_or_default();
    if int_part.contains(',') {
        let groups: Vec<&str> = int_part.split(',').collect();
        let ok = groups.first().is_some_and(|g| (1..=3).contains(&g.len()))
            && groups[1..].iter().all(|g| g.len() == 3);
        if !ok {
            return None;
        }
    }
    let cleaned = t.replace(',', "");
    cleaned
        .chars()
        .all(|c| c.is_ascii_digit() || c == '.' || c == '-' || c == 'e' || c == 'E' || c == '+')
        .then_some(cleaned)
}

fn as_integer(s: &str) -> Option<i64> {
    let n = plain_number(s)?;
    if n.contains(['.', 'e', 'E']) {
        return None;
    }
    n.parse().ok()
}

fn as_number(s: &str) -> Option<f64> {
    plain_number(s)?
        .parse::<f64>()
        .ok()
        .filter(|f| f.is_finite())
}

fn as_bool(s: &str) -> Option<bool> {
    match s.trim().to_lowercase().as_str() {
        "true" | "yes" => Some(true),
        "false" | "no" => Some(false),
        _ => None,
    }
}

fn as_date(s: &str) -> Option<chrono::NaiveDate> {
    chrono::NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d").ok()
}

fn as_datetime(s: &str) -> Option<chrono::NaiveDateTime> {
    let t = s.trim();
    chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M"))
        .ok()
}

fn column_type(cells: &[&str]) -> ColumnType {
    let filled: Vec<&str> = cells.iter().copied().filter(|c| !c.is_empty()).collect();
    if filled.is_empty() {
        return ColumnType::Null;
    }
    let all = |f: &dyn Fn(&str) -> bool| filled.iter().all(|c| f(c));
    if all(&|c| as_integer(c).is_some()) {
        ColumnType::Integer
    } else if all(&|c| as_number(c).is_some()) {
        ColumnType::Number
    } else if all(&|c| as_bool(c).is_some()) {
        ColumnType::Boolean
    } else if all(&|c| as_date(c).is_some()) {
        ColumnType::Date
    } else if all(&|c| as_datetime(c).is_some() || as_date(c).is_some()) {
        ColumnType::Datetime
    } else {
        ColumnType::String
    }
}

fn convert(cell: &str, t: ColumnType) -> Value {
    if cell.is_empty() {
        return Value::Null;
    }
    let v = match t {
        ColumnType::Integer => as_integer(cell).map(Value::from),
        ColumnType::Number => as_number(cell)
            .and_then(Number::from_f64)
            .map(Value::Number),
        ColumnType::Boolean => as_bool(cell).map(Value::Bool),
        ColumnType::Date => as_date(cell).map(|d| Value::String(d.format("%Y-%m-%d").to_string())),
        ColumnType::Datetime => as_datetime(cell)
            .or_else(|| as_date(cell).and_then(|d| d.and_hms_opt(0, 0, 0)))
            .map(|d| Value::String(d.format("%Y-%m-%dT%H:%M:%S").to_string())),
        ColumnType::String | ColumnType::Null => None,
    };
    v.unwrap_or_else(|| Value::String(cell.to_owned()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sheets_and_markdown_tables_come_back_typed() {
        let text = "[Page 1]\nIntro.\n\n[Sheet: Sales]\n\n| Region | Units | Price | Paid | When | | Region |\n| --- | --- | --- | --- | --- | --- | --- |\n| North | 1,200 | 2.5 | yes | 2026-01-31 | | a \\| b |\n| South | 30 |  | no | 2026-02-01 | | c |\n\n[Page 2]\n## Staff\n\n| Name | Since |\n| --- | --- |\n| Ana | 2020-01-01 10:00 |\n| Bo | 2021-05-06 |\n\n| x |\n| --- |\n| 1 |";
        let t = extract(text);
        assert_eq!(t.len(), 3);
        assert_eq!((t[0].name.as_str(), t[0].page), ("Sales", Some(1)));
        let types: Vec<ColumnType> = t[0].columns.iter().map(|c| c.column_type).collect();
        assert_eq!(
            types,
            [
                ColumnType::String,
                ColumnType::Integer,
                ColumnType::Number,
                ColumnType::Boolean,
                ColumnType::Date,
                ColumnType::Null,
                ColumnType::String
            ]
        );
        let names: Vec<&str> = t[0].columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["Region", "Units", "Price", "Paid", "When", "column_6", "Region_2"]
        );
        assert_eq!(t[0].columns[2].nulls, 1);
        assert_eq!(
            Value::Object(t[0].rows[0].clone()),
            json!({"Region":"North","Units":1200,"Price":2.5,"Paid":true,"When":"2026-01-31","column_6":null,"Region_2":"a | b"})
        );
        assert_eq!(t[1].name, "Staff");
        assert_eq!(t[1].page, Some(2));
        assert_eq!(t[1].columns[1].column_type, ColumnType::Datetime);
        assert_eq!(t[1].rows[1]["Since"], "2021-05-06T00:00:00");
        assert_eq!(t[2].name, "Staff (2)", "the second table of the section");
        assert_eq!(extract("| a |\n| --- |\n| 1 |")[0].name, "table 1");
    }

    #[test]
    fn a_table_split_across_chunks_is_one_table() {
        let text = "[Sheet: s]\n\n| a | b |\n| --- | --- |\n| 1 | x |\n| 2 | y |\n\n| 3 | z |\n| 4 | w |\n\n| c |\n| --- |\n| 5 |\n\n| 6 | v |";
        let t = extract(text);
        assert_eq!(t.len(), 2, "{t:?}");
        assert_eq!(t[0].rows.len(), 4);
        assert_eq!(t[0].columns[0].column_type, ColumnType::Integer);
        assert_eq!(
            t[1].rows.len(),
            1,
            "a row of another width does not continue it"
        );
    }

    #[test]
    fn text_without_tables_has_none() {
        assert!(extract("a | b\nno table here\n|---|").is_empty());
        assert_eq!(as_integer("1,2345"), None);
        assert_eq!(as_integer("12,345"), Some(12345));
        assert_eq!(column_type(&["1", "2.5"]), ColumnType::Number);
        assert_eq!(column_type(&["1", "x"]), ColumnType::String);
    }
}
