mod home;
mod login;
mod not_found;

pub use home::HomePage;
pub use login::LoginPage;
pub use not_found::NotFoundPage;
