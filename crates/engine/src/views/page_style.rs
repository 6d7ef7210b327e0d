//! The style every page shares, inline in each page (the Content-Security-Policy allows
//! inline style and nothing else).
//!
//! - Light and dark: colours are custom properties, switched by `prefers-color-scheme`;
//!   drawings (the tree, the usage chart) keep a light ground of their own, as their
//!   colours are written in them.
//! - Prose is the body font; code, commands, output and diffs are monospace, their lines
//!   kept; a shell command's `$ ` prompt is the style's, not the text's. Highlighted tokens ([`super::highlight`]) take their colour from their class.
//! - Print: no background, no width cap, every folded part open (where the browser lets a
//!   style open it), a message not split across pages where it fits on one, the contents
//!   and page links left out.

/// The style sheet (see the module docs).
pub const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1d1d1f;--bg:#fff;--muted:#666;--line:#ddd;\
--user:#f3f7ff;--assistant:#fafafa;--tool:#f7f7f2;--summary:#fff8e6;--summary-line:#e6c36a;\
--code:#f3f3f3;--label:#e6f0d8;--link:#1d4ed8;--error:#b00020;\
--hl-comment:#6a737d;--hl-keyword:#a626a4;--hl-string:#22863a;--hl-constant:#b75501;\
--hl-function:#4078f2;--hl-type:#c18401;--hl-ins:#e6ffec;--hl-del:#ffebe9}\
@media (prefers-color-scheme:dark){:root{--fg:#e6e6e6;--bg:#16181c;--muted:#9aa0a6;\
--line:#3a3f47;--user:#1c2636;--assistant:#1d2025;--tool:#22231e;--summary:#2e2816;\
--summary-line:#7a6322;--code:#24272e;--label:#2f3d22;--link:#8ab4f8;--error:#ff6b81;\
--hl-comment:#8b949e;--hl-keyword:#d2a8ff;--hl-string:#a5d6ff;--hl-constant:#ffa657;\
--hl-function:#79c0ff;--hl-type:#e3b341;--hl-ins:#12361f;--hl-del:#42181c}}\
body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:0 auto;padding:1rem;\
color:var(--fg);background:var(--bg)}\
a{color:var(--link)}\
header{border-bottom:1px solid var(--line);margin-bottom:1rem}\
h1{font-size:1.4rem;margin:.2rem 0}\
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:0 1rem;margin:.5rem 0}\
dl.facts dt{color:var(--muted)}dl.facts dd{margin:0}\
nav.contents ol{margin:.2rem 0;padding-left:2rem}nav.contents li{overflow-wrap:anywhere}\
section.message{border:1px solid var(--line);border-radius:6px;margin:.8rem 0;padding:.2rem .9rem}\
section.role-user{background:var(--user)}section.role-assistant{background:var(--assistant)}\
section.role-toolResult,section.role-bashExecution,section.role-pythonExecution{background:var(--tool)}\
section.role-compactionSummary,section.role-branchSummary{background:var(--summary);\
border-color:var(--summary-line)}\
h2{font-size:1rem;margin:.4rem 0}h2 a{color:inherit;text-decoration:none}\
h2 .detail,h2 time,h2 .entry,h2 .usage{color:var(--muted);font-weight:normal;font-size:.85rem;margin-left:.5rem}\
h2 .label{background:var(--label);border-radius:3px;padding:0 .3rem;font-size:.85rem;margin-left:.5rem}\
.md{overflow-wrap:anywhere}.md h1,.md h2,.md h3,.md h4{font-size:1.05rem;margin:.8rem 0 .3rem}\
.md table{border-collapse:collapse}.md td,.md th{border:1px solid var(--line);padding:.1rem .4rem}\
.md blockquote{border-left:3px solid var(--line);margin:.3rem 0;padding-left:.8rem;color:var(--muted)}\
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}\
:not(pre)>code{background:var(--code);border-radius:3px;padding:0 .2rem}\
pre{background:var(--code);padding:.5rem;tab-size:4;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}\
figure{margin:.4rem 0}pre.command>code::before{content:\"$ \";color:var(--muted)}figcaption,.tool .what{color:var(--muted);font-size:.85rem}\
details>summary{cursor:pointer;color:var(--muted)}\
.note,.status,.stopped{color:var(--muted);font-style:italic}.error{color:var(--error);font-weight:bold}\
.kind{font-weight:bold}img{max-width:100%}\
header svg{background:#fff;border-radius:4px}\
.hl-comment{color:var(--hl-comment);font-style:italic}\
.hl-keyword,.hl-storage{color:var(--hl-keyword)}\
.hl-string{color:var(--hl-string)}\
.hl-constant{color:var(--hl-constant)}\
.hl-entity.hl-name,.hl-support.hl-function{color:var(--hl-function)}\
.hl-support.hl-type,.hl-entity.hl-name.hl-type{color:var(--hl-type)}\
.hl-markup.hl-inserted{background:var(--hl-ins)}.hl-markup.hl-deleted{background:var(--hl-del)}\
.hl-meta.hl-range,.hl-meta.hl-header{color:var(--hl-function)}\
@media print{:root{--bg:#fff;--fg:#000;--user:#fff;--assistant:#fff;--tool:#fff;--summary:#fff;\
--code:#f6f6f6}body{max-width:none;padding:0}nav.contents,nav.pages{display:none}\
section.message{break-inside:avoid-page}h2{break-after:avoid}\
details::details-content{content-visibility:visible;display:contents}\
details>summary{list-style:none}}";
