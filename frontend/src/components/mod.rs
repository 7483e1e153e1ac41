mod corpus_list;
mod job;
mod pager;
mod shell;
mod top_bar;

pub use corpus_list::CorpusList;
pub use job::{JobBar, JobRef, JobWatch};
pub use pager::{Cursors, PagerNav};
pub use shell::{count, error_view, loading_view, url_encode, Shell};
pub use top_bar::TopBar;
