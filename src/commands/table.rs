//! The subcommands' listings as plain-text tables: each column as wide as its widest cell, so that a long scope
//! list, origin or name never pushes the columns after it out of line (fixed widths did, `clients list`).

/// How a column's cells sit in its width.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    /// Numbers, so that their digits line up.
    Right,
}

/// A header and rows, written once every row is known.
#[derive(Debug)]
pub struct Table {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

/// Between two columns.
const GAP: &str = "  ";

impl Table {
    pub fn new(columns: &[(&'static str, Align)]) -> Self {
        Table {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// One row, a cell per column.
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len(), "a cell per column");
        self.rows.push(cells);
    }

    /// The header line and a line per row, each ending in a newline; nothing trails the last cell of a line.
    pub fn render(&self) -> String {
        let header: Vec<String> = self
            .columns
            .iter()
            .map(|(name, _)| (*name).to_owned())
            .collect();
        let lines: Vec<&Vec<String>> = std::iter::once(&header).chain(&self.rows).collect();
        let widths: Vec<usize> = (0..self.columns.len())
            .map(|column| {
                lines
                    .iter()
                    .map(|line| line.get(column).map_or(0, |cell| cell.chars().count()))
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut text = String::new();
        for line in lines {
            let mut written = String::new();
            for (column, cell) in line.iter().enumerate() {
                if column > 0 {
                    written.push_str(GAP);
                }
                let pad = " ".repeat(widths[column].saturating_sub(cell.chars().count()));
                match self.columns[column].1 {
                    Align::Left => {
                        written.push_str(cell);
                        written.push_str(&pad);
                    }
                    Align::Right => {
                        written.push_str(&pad);
                        written.push_str(cell);
                    }
                }
            }
            text.push_str(written.trim_end());
            text.push('\n');
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_cell_widens_its_column_and_the_columns_after_it_stay_in_line() {
        let mut table = Table::new(&[
            ("name", Align::Left),
            ("scopes", Align::Left),
            ("n", Align::Right),
        ]);
        table.row(vec![
            "ops".into(),
            "decisions:write runs:read runs:write users:write webhooks:write".into(),
            "7".into(),
        ]);
        table.row(vec![
            "reviewer".into(),
            "decisions:anonymous".into(),
            "12".into(),
        ]);
        let text = table.render();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let column = |line: &str, word: &str| line.find(word).unwrap();
        assert_eq!(
            column(lines[0], "scopes"),
            column(lines[1], "decisions:write")
        );
        assert_eq!(
            column(lines[1], "decisions:write"),
            column(lines[2], "decisions:anonymous")
        );
        // Numbers end in one column.
        assert_eq!(lines[1].len(), lines[2].len(), "{text}");
        assert!(
            lines[2].ends_with("12") && lines[1].ends_with(" 7"),
            "{text}"
        );
    }

    #[test]
    fn nothing_trails_the_last_cell_of_a_line() {
        let mut table = Table::new(&[("name", Align::Left), ("origins", Align::Left)]);
        table.row(vec!["ops".into(), String::new()]);
        assert_eq!(table.render(), "name  origins\nops\n");
    }
}
