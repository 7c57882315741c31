//! The MetaRoCE reference transport. Not written yet: see issue 4.
