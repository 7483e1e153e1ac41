//! Spreadsheets (XLSX, XLS, XLSB, ODS) through calamine: one `[Sheet: name]` block per
//! non-empty sheet, rendered as a Markdown table whose header is the first non-empty row.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Cursor;

use calamine::{Data, Ods, Range, Reader as _, SheetType, Xls, Xlsb, Xlsx};
use quick_xml::events::Event;

use crate::guard::{self, Out, ZipReader};
use crate::table;
use crate::xml::{local, Reader};
use crate::{ExtractError, Format, Limits};

/// Non-empty cells of one sheet, by row then column.
type Grid = BTreeMap<u32, BTreeMap<u32, String>>;

struct Cells {
    grid: Grid,
    count: usize,
    max: usize,
}

impl Cells {
    fn new(limits: &Limits) -> Cells {
        Cells {
            grid: Grid::new(),
            count: 0,
            // Every non-empty cell renders as at least "| x " (three characters and more).
            max: (limits.max_output_chars / 3).max(1),
        }
    }

    fn put(&mut self, row: u32, col: u32, value: &Data) -> Result<(), ExtractError> {
        let text = format_cell(value);
        if text.trim().is_empty() {
            return Ok(());
        }
        self.count += 1;
        if self.count > self.max {
            return Err(ExtractError::TooLarge(format!(
                "the workbook has more than {} non-empty cells",
                self.max
            )));
        }
        self.grid.entry(row).or_default().insert(col, text);
        Ok(())
    }
}

fn calamine_error(format: Format, e: impl std::fmt::Display) -> ExtractError {
    let msg = e.to_string();
    let lower = msg.to_ascii_lowercase();
    if lower.contains("password") || lower.contains("encrypt") {
        ExtractError::Unsupported(format!("the {format} workbook is password-protected"))
    } else if (lower.contains("cannot find") && lower.contains("stream"))
        || lower.contains("invalid ole signature")
    {
        ExtractError::Unsupported(format!(
            "not an Excel workbook: an OLE2 file without a Workbook stream (legacy .doc and .ppt \
             are not supported) ({msg})"
        ))
    } else {
        ExtractError::Corrupt(format!("unreadable {format} workbook: {msg}"))
    }
}

pub(crate) fn extract(
    bytes: &[u8],
    format: Format,
    limits: &Limits,
) -> Result<String, ExtractError> {
    if format != Format::Xls {
        // calamine reads the zip itself: make sure first that it cannot be a bomb.
        guard::verify_zip(bytes, limits)?;
    }
    if format == Format::Ods {
        ods_precheck(bytes, limits)?;
    }
    let sheets = match format {
        Format::Xlsx => read_xlsx(bytes, limits)?,
        Format::Xlsb => read_xlsb(bytes, limits)?,
        Format::Xls => {
            let wb: Xls<_> = calamine::open_workbook_from_rs(Cursor::new(bytes))
                .map_err(|e| calamine_error(format, e))?;
            read_ranges(wb, format, limits)?
        }
        Format::Ods => {
            let wb: Ods<_> = calamine::open_workbook_from_rs(Cursor::new(bytes))
                .map_err(|e| calamine_error(format, e))?;
            read_ranges(wb, format, limits)?
        }
        other => {
            return Err(ExtractError::Unsupported(format!(
                "{other} is not a spreadsheet format"
            )))
        }
    };
    let mut out = Out::new(limits);
    for (name, grid) in sheets {
        if let Some(table) = render(&grid, limits)? {
            out.block(&format!("[Sheet: {}]\n\n{table}", one_line(&name)))?;
        }
    }
    Ok(out.finish())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Names of the sheets that hold cells (chart sheets have none).
fn cell_sheets(meta: &[calamine::Sheet]) -> Vec<String> {
    meta.iter()
        .filter(|s| !matches!(s.typ, SheetType::ChartSheet))
        .map(|s| s.name.clone())
        .collect()
}

fn read_xlsx(bytes: &[u8], limits: &Limits) -> Result<Vec<(String, Grid)>, ExtractError> {
    let format = Format::Xlsx;
    let mut wb: Xlsx<_> = calamine::open_workbook_from_rs(Cursor::new(bytes))
        .map_err(|e| calamine_error(format, e))?;
    let mut cells = Cells::new(limits);
    let mut sheets = Vec::new();
    for name in cell_sheets(wb.sheets_metadata()) {
        let mut reader = wb
            .worksheet_cells_reader(&name)
            .map_err(|e| calamine_error(format, e))?;
        while let Some(cell) = reader.next_cell().map_err(|e| calamine_error(format, e))? {
            let (row, col) = cell.get_position();
            cells.put(row, col, &Data::from(cell.get_value().clone()))?;
        }
        sheets.push((name, std::mem::take(&mut cells.grid)));
    }
    Ok(sheets)
}

fn read_xlsb(bytes: &[u8], limits: &Limits) -> Result<Vec<(String, Grid)>, ExtractError> {
    let format = Format::Xlsb;
    let mut wb: Xlsb<_> = calamine::open_workbook_from_rs(Cursor::new(bytes))
        .map_err(|e| calamine_error(format, e))?;
    let mut cells = Cells::new(limits);
    let mut sheets = Vec::new();
    for name in cell_sheets(wb.sheets_metadata()) {
        let mut reader = wb
            .worksheet_cells_reader(&name)
            .map_err(|e| calamine_error(format, e))?;
        while let Some(cell) = reader.next_cell().map_err(|e| calamine_error(format, e))? {
            let (row, col) = cell.get_position();
            cells.put(row, col, &Data::from(cell.get_value().clone()))?;
        }
        sheets.push((name, std::mem::take(&mut cells.grid)));
    }
    Ok(sheets)
}

fn read_ranges<R, RS>(
    mut wb: R,
    format: Format,
    limits: &Limits,
) -> Result<Vec<(String, Grid)>, ExtractError>
where
    RS: std::io::Read + std::io::Seek,
    R: calamine::Reader<RS>,
    R::Error: std::fmt::Display,
{
    let mut cells = Cells::new(limits);
    let mut sheets = Vec::new();
    for name in cell_sheets(wb.sheets_metadata()) {
        let range: Range<Data> = wb
            .worksheet_range(&name)
            .map_err(|e| calamine_error(format, e))?;
        for (row, col, value) in range.used_cells() {
            let (r0, c0) = range.start().unwrap_or((0, 0));
            let row = r0.saturating_add(u32::try_from(row).unwrap_or(u32::MAX));
            let col = c0.saturating_add(u32::try_from(col).unwrap_or(u32::MAX));
            cells.put(row, col, value)?;
        }
        sheets.push((name, std::mem::take(&mut cells.grid)));
    }
    Ok(sheets)
}

/// Renders a sheet: the first non-empty row is the header; only rows and columns holding at
/// least one non-empty cell appear. `None` for an empty sheet.
fn render(grid: &Grid, limits: &Limits) -> Result<Option<String>, ExtractError> {
    let columns: BTreeSet<u32> = grid.values().flat_map(|r| r.keys().copied()).collect();
    let width = columns.len();
    if width == 0 {
        return Ok(None);
    }
    let mut out = String::new();
    let mut chars = 0usize;
    for (i, row) in grid.values().enumerate() {
        let start = out.len();
        if i > 0 {
            out.push('\n');
        }
        let cells: Vec<String> = columns
            .iter()
            .map(|c| row.get(c).map(|v| table::cell_text(v)).unwrap_or_default())
            .collect();
        table::push_row(&mut out, cells.iter().map(String::as_str), width);
        if i == 0 {
            out.push('\n');
            table::push_row(&mut out, std::iter::repeat_n("---", width), width);
        }
        chars += out[start..].chars().count();
        if chars > limits.max_output_chars {
            return Err(guard::too_much_text(limits));
        }
    }
    Ok(Some(out))
}

/// A cell's text: numbers as Rust prints them (`3`, `2.5`), dates as `YYYY-MM-DD[ HH:MM:SS]`,
/// durations as `H:MM:SS`, booleans as `true`/`false`, errors as Excel shows them (`#DIV/0!`).
fn format_cell(value: &Data) -> String {
    match value {
        Data::Empty => String::new(),
        Data::String(s) => s.clone(),
        Data::Int(i) => i.to_string(),
        Data::Float(f) => f.to_string(),
        Data::Bool(b) => b.to_string(),
        Data::DateTime(dt) if dt.is_duration() => {
            let total = (dt.as_f64() * 86_400.0).round();
            if !total.is_finite() || total.abs() > 1e12 {
                return dt.as_f64().to_string();
            }
            // In range: the cast is exact.
            #[allow(clippy::cast_possible_truncation)]
            let secs = total as i64;
            let sign = if secs < 0 { "-" } else { "" };
            let secs = secs.unsigned_abs();
            format!(
                "{sign}{}:{:02}:{:02}",
                secs / 3600,
                (secs / 60) % 60,
                secs % 60
            )
        }
        Data::DateTime(dt) => {
            let v = dt.as_f64();
            if !v.is_finite() || !(-1.0..2_958_466.0).contains(&v) {
                return v.to_string();
            }
            let (y, mo, d, h, mi, s, _) = dt.to_ymd_hms_milli();
            if v.fract() == 0.0 || (h, mi, s) == (0, 0, 0) {
                if v < 1.0 {
                    // A bare time of day.
                    return format!("{h:02}:{mi:02}:{s:02}");
                }
                format!("{y:04}-{mo:02}-{d:02}")
            } else if v < 1.0 {
                format!("{h:02}:{mi:02}:{s:02}")
            } else {
                format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02}")
            }
        }
        Data::DateTimeIso(s) => s
            .strip_suffix("T00:00:00")
            .unwrap_or(s)
            .replacen('T', " ", 1),
        Data::DurationIso(s) => s.clone(),
        Data::Error(e) => e.to_string(),
    }
}

/// Refuses an ODS whose repeated rows/columns would make calamine build a dense grid bigger
/// than the decompression budget allows (about 64 bytes a cell), before calamine expands them.
fn ods_precheck(bytes: &[u8], limits: &Limits) -> Result<(), ExtractError> {
    let max_cells = (limits.max_decompressed_bytes / 64).max(1);
    let mut zip = ZipReader::new(bytes, limits)?;
    let Some(content) = zip.read("content.xml")? else {
        return Ok(()); // calamine will say what is wrong
    };
    let mut r = Reader::new(&content, "content.xml");
    // Per table: rows seen so far (with repeats), first/last row holding content, widest
    // extent (with column repeats) up to a row's last content cell.
    let mut rows: u64 = 0;
    let mut first: Option<u64> = None;
    let mut last: u64 = 0;
    let mut width: u64 = 0;
    // Per row.
    let mut row_repeat: u64 = 1;
    let mut col: u64 = 0;
    let mut row_extent: u64 = 0;
    let repeat = |r: &Reader<'_>, e: &quick_xml::events::BytesStart<'_>, attr: &[u8]| -> u64 {
        r.attr(e, attr)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(1)
            .max(1)
    };
    let check = |first: Option<u64>, last: u64, width: u64| -> Result<(), ExtractError> {
        if let Some(first) = first {
            let cells = (last.saturating_sub(first))
                .saturating_add(1)
                .saturating_mul(width);
            if cells > max_cells {
                return Err(ExtractError::TooLarge(format!(
                    "a sheet's repeated rows and columns expand to about {cells} cells, more \
                     than the limit of {max_cells}"
                )));
            }
        }
        Ok(())
    };
    loop {
        let (_, ev) = r.next()?;
        match ev {
            Event::Start(ref e) | Event::Empty(ref e) => {
                let empty = matches!(ev, Event::Empty(_));
                match local(e.name()).as_ref() {
                    b"table" if !empty => {
                        rows = 0;
                        first = None;
                        last = 0;
                        width = 0;
                    }
                    b"table-row" => {
                        row_repeat = repeat(&r, e, b"number-rows-repeated");
                        col = 0;
                        row_extent = 0;
                        if empty {
                            rows = rows.saturating_add(row_repeat);
                        }
                    }
                    b"table-cell" | b"covered-table-cell" => {
                        let n = repeat(&r, e, b"number-columns-repeated");
                        col = col.saturating_add(n);
                        let content = !empty || r.attr(e, b"value-type").is_some();
                        if content {
                            row_extent = col;
                        }
                    }
                    _ => {}
                }
            }
            Event::End(ref e) => match local(e.name()).as_ref() {
                b"table-row" => {
                    if row_extent > 0 {
                        first.get_or_insert(rows);
                        last = rows.saturating_add(row_repeat - 1);
                        width = width.max(row_extent);
                        check(first, last, width)?;
                    }
                    rows = rows.saturating_add(row_repeat);
                }
                b"table" => check(first, last, width)?,
                _ => {}
            },
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use calamine::{ExcelDateTime, ExcelDateTimeType};

    #[test]
    fn formats_cells() {
        assert_eq!(format_cell(&Data::Float(3.0)), "3");
        assert_eq!(format_cell(&Data::Float(2.5)), "2.5");
        assert_eq!(format_cell(&Data::Int(-4)), "-4");
        assert_eq!(format_cell(&Data::Bool(true)), "true");
        let date = ExcelDateTime::new(45429.0, ExcelDateTimeType::DateTime, false);
        assert_eq!(format_cell(&Data::DateTime(date)), "2024-05-17");
        let at = ExcelDateTime::new(45429.5, ExcelDateTimeType::DateTime, false);
        assert_eq!(format_cell(&Data::DateTime(at)), "2024-05-17 12:00:00");
        let dur = ExcelDateTime::new(1.5, ExcelDateTimeType::TimeDelta, false);
        assert_eq!(format_cell(&Data::DateTime(dur)), "36:00:00");
        assert_eq!(
            format_cell(&Data::DateTimeIso("2024-05-17T00:00:00".into())),
            "2024-05-17"
        );
    }

    #[test]
    fn renders_sparse_grid() {
        let mut grid = Grid::new();
        grid.entry(2).or_default().insert(1, "Name".into());
        grid.entry(2).or_default().insert(5, "Qty".into());
        grid.entry(7).or_default().insert(5, "4".into());
        let t = render(&grid, &Limits::default()).ok().flatten();
        assert_eq!(
            t.as_deref(),
            Some("| Name | Qty |\n| --- | --- |\n|  | 4 |")
        );
        assert_eq!(
            render(&Grid::new(), &Limits::default()).ok().flatten(),
            None
        );
    }
}
