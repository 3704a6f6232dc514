//! The shell approval offers scopes from the exact command to the whole program (written by the scopes helper).
