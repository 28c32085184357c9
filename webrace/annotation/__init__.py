"""The annotation engine (seed 000 section 6, seed 003 section 6): pages judged against the
interests of the people they were fetched for."""
