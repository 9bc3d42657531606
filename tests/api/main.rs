mod auth;
mod binary;
mod embedded;
mod health;
mod helpers;
mod openapi;
mod problems;
