//! Erasing what SQLite leaves of rows in the unused space of the index's pages.
//!
//! `PRAGMA secure_delete` zeroes a cell where it lives when its row is deleted, and a page
//! when it is freed. It does not reach copies: when SQLite rebalances a b-tree it may lay a
//! page's cells out again from the page's end (`rebuildPage`), and the bytes between the
//! new start of the cells and the old one — cells that moved to a sibling page or within
//! the page — stay as they were, unused, until new cells are written over them. A row
//! deleted later is zeroed where it lives and its older copies stay: one was found in a
//! page of the vocabulary's index, the whole word of a removed session (BENCHMARKS.md,
//! "Search: erasing").
//!
//! [`erase_unused`] walks every b-tree of the file from its root and zeroes, in each of its
//! pages, the space between the cell pointers and the cells and the bodies of the free
//! blocks (past their 4-byte headers), through SQLite's `sqlite_dbpage` table: the page is
//! written back whole through SQLite's pager, in the caller's transaction, logged like any
//! other write. Only unused bytes change, so every page means what it meant; a page whose
//! unused space is zero already is not written.
//!
//! Invariant: once [`erase_unused`] has run in a transaction that commits, no b-tree page
//! of the file holds a byte that is not zero outside its header, its cell pointers, its
//! cells and the headers of its free blocks. (Fragments of at most 3 bytes are zeroed when
//! they are freed, with `secure_delete`; overflow and free pages, when freed.)

use rusqlite::{ffi, params, Connection};

/// Zeroes the unused space of every b-tree page of `conn`'s main database (see the module
/// documentation), within the caller's write transaction; returns the pages written.
/// A page that is not what the b-tree that leads to it says is a corruption error.
pub(super) fn erase_unused(conn: &Connection) -> rusqlite::Result<usize> {
    let page_count: u32 = conn.query_row("PRAGMA page_count", [], |r| r.get(0))?;
    let mut todo: Vec<u32> = vec![1];
    {
        let mut roots = conn.prepare("SELECT rootpage FROM sqlite_schema WHERE rootpage > 1")?;
        for root in roots.query_map([], |r| r.get(0))? {
            todo.push(root?);
        }
    }
    let mut read = conn.prepare_cached("SELECT data FROM sqlite_dbpage WHERE pgno = ?1")?;
    let mut write = conn.prepare_cached("UPDATE sqlite_dbpage SET data = ?2 WHERE pgno = ?1")?;
    let mut seen = vec![false; page_count as usize + 1];
    // Bytes reserved at the end of each page, by the file's header (none in an index gjcfs
    // makes).
    let reserved: u8 = read.query_row([1], |r| {
        let header = r.get_ref(0)?.as_blob()?;
        Ok(header.get(20).copied().unwrap_or(0))
    })?;
    let mut written = 0;
    while let Some(pgno) = todo.pop() {
        let fresh = seen
            .get_mut(pgno as usize)
            .filter(|_| pgno > 0)
            .map(|seen| !std::mem::replace(seen, true));
        if fresh != Some(true) {
            return Err(corrupt(pgno, "out of the file, or in two places"));
        }
        let mut page: Vec<u8> = read.query_row([pgno], |r| r.get(0))?;
        let usable = page.len().saturating_sub(usize::from(reserved));
        if erase_page(&mut page, pgno, usable, &mut todo)? {
            write.execute(params![pgno, page])?;
            written += 1;
        }
    }
    Ok(written)
}

/// Zeroes the unused space of b-tree page `pgno` (`usable` bytes of `page` are its), and
/// pushes its children on `children`; returns whether a byte changed.
fn erase_page(
    page: &mut [u8],
    pgno: u32,
    usable: usize,
    children: &mut Vec<u32>,
) -> rusqlite::Result<bool> {
    // Page 1 starts with the file's header.
    let header = if pgno == 1 { 100 } else { 0 };
    let bad = |what| corrupt(pgno, what);
    if usable < 512 || usable > page.len() || header + 12 > usable {
        return Err(bad("of no usable size"));
    }
    // 2, 5: interior pages (of an index, of a table); 10, 13: leaves.
    let header_len = match page[header] {
        2 | 5 => 12,
        10 | 13 => 8,
        _ => return Err(bad("not a b-tree page")),
    };
    let cells = u16_at(page, header + 3);
    let pointers_end = header + header_len + 2 * cells;
    // 0 stands for 65,536, the largest page.
    let cells_start = match u16_at(page, header + 5) {
        0 => 1 << 16,
        at => at,
    };
    if pointers_end > cells_start || cells_start > usable {
        return Err(bad("its cells overlap their pointers"));
    }
    if header_len == 12 {
        children.push(u32_at(page, header + 8));
        for k in 0..cells {
            let cell = u16_at(page, header + header_len + 2 * k);
            if cell < cells_start || cell + 4 > usable {
                return Err(bad("a cell out of its page"));
            }
            children.push(u32_at(page, cell));
        }
    }
    let mut changed = zero(&mut page[pointers_end..cells_start]);
    let mut free = u16_at(page, header + 1);
    let mut after = cells_start;
    while free != 0 {
        if free < after || free + 4 > usable {
            return Err(bad("a free block out of order"));
        }
        let (next, size) = (u16_at(page, free), u16_at(page, free + 2));
        if size < 4 || free + size > usable {
            return Err(bad("a free block out of its page"));
        }
        changed |= zero(&mut page[free + 4..free + size]);
        after = free + size;
        free = next;
    }
    Ok(changed)
}

fn u16_at(page: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([page[at], page[at + 1]]))
}

fn u32_at(page: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([page[at], page[at + 1], page[at + 2], page[at + 3]])
}

/// Zeroes `bytes`; returns whether one was not zero.
fn zero(bytes: &mut [u8]) -> bool {
    let any = bytes.iter().any(|&b| b != 0);
    if any {
        bytes.fill(0);
    }
    any
}

fn corrupt(pgno: u32, what: &str) -> rusqlite::Error {
    rusqlite::Error::SqliteFailure(
        ffi::Error::new(ffi::SQLITE_CORRUPT),
        Some(format!("page {pgno} of the index is {what}")),
    )
}
