"""Service class description library for DynaBot (issue: DynaBot). Nothing here yet."""
