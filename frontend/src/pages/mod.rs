mod corpus;
mod document;
mod entity;
mod home;
mod knowledge;
mod login;
mod not_found;
mod search;

pub use corpus::CorpusPage;
pub use document::DocumentPage;
pub use entity::EntityPage;
pub use home::HomePage;
pub use knowledge::KnowledgePage;
pub use login::LoginPage;
pub use not_found::NotFoundPage;
pub use search::SearchPage;
