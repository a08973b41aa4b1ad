//! Entry points for the fuzz targets and their seeded replay tests.
