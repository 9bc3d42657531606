mod auth;
mod binary;
mod embedded;
mod events;
mod health;
mod helpers;
mod openapi;
mod problems;
