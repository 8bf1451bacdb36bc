//! TEMPORARY placeholder (replaced by the plan parser at merge).
