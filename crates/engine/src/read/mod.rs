//! Reading one session file: lenient JSONL reading and patch replay ([`replay`]), the lenient
//! load the readers use ([`load`]) and the strict inspection a write needs ([`inspect`]).

pub mod inspect;
pub mod load;
pub mod replay;
