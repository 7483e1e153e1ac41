mod corpus_list;
mod top_bar;

pub use corpus_list::CorpusList;
pub use top_bar::{LogoutButton, TopBar};
