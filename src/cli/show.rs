//! `gjcfs show SESSION --format md|html|tree|usage`: a session rendered for reading.

use std::io::{BufWriter, Write};
use std::sync::Arc;

use anyhow::Result;
use clap::{Args, ValueEnum};
use gjcfs_engine::format::blob::BlobStore;
use gjcfs_engine::storage::FileStorage;
use gjcfs_engine::views::html::{self, Images, PageOptions};
use gjcfs_engine::views::tree_svg::TreeLinks;
use gjcfs_engine::views::{markdown, tree, usage};

use super::output::load_for_command;
use super::store::StoreArgs;

#[derive(Args)]
pub struct ShowArgs {
    /// A session file (.jsonl), or a session id — or a unique prefix of one, or of the
    /// file's name — looked up in the store.
    session: std::path::PathBuf,
    /// md: the context at the current leaf as Markdown; html: the same as one
    /// self-contained HTML page (images embedded); tree: every entry, one a line,
    /// branches drawn, the leaf marked; usage: token and cost totals with a per-model
    /// breakdown, as JSON.
    #[arg(long, value_enum, default_value = "md")]
    format: Format,
    #[command(flatten)]
    store: StoreArgs,
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Md,
    Html,
    Tree,
    Usage,
}

pub fn run(args: ShowArgs) -> Result<()> {
    let path = args.store.resolve(&args.session)?;
    let loaded = load_for_command(&path)?;
    // The context the agent sends: its load-time sanitizer applied, in memory only.
    loaded.sanitize();
    let session = &loaded.session;
    // Image links point into the agent's blob store, and cold-spilled content is read back
    // from it, when it can be named.
    let blobs = args
        .store
        .agent_dirs()
        .ok()
        .map(|dirs| BlobStore::new(dirs.blob_dir(), Arc::new(FileStorage)));
    let mut out = BufWriter::new(std::io::stdout().lock());
    match (args.format, &blobs) {
        (Format::Md, Some(blobs)) => {
            let prefix = format!("{}/", blobs.dir().display());
            markdown::write_context_md_rehydrated(session, &prefix, blobs, &mut out)?;
        }
        (Format::Md, None) => markdown::write_context_md(session, "blobs/", &mut out)?,
        (Format::Html, blobs) => {
            let options = PageOptions {
                images: blobs.as_ref().map_or(Images::Link("blobs/"), Images::Embed),
                cold: blobs.as_ref(),
                leaf: None,
                // A page on its own: the tree is drawn, with nothing to link to.
                tree: Some(TreeLinks {
                    leaves: None,
                    current: None,
                }),
                // The newest messages; the page says which it leaves out.
                page: None,
                page_links: None,
            };
            html::write_context_html(session, &options, &mut out)?
        }
        (Format::Tree, Some(blobs)) => tree::write_tree_rehydrated(session, blobs, &mut out)?,
        (Format::Tree, None) => tree::write_tree(session, &mut out)?,
        (Format::Usage, _) => out.write_all(&usage::session_usage_json(session))?,
    }
    out.flush()?;
    Ok(())
}
