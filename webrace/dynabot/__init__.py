"""DynaBot (seed 004, section 2.4): finding dynamic Web sources of a service class by probing their forms."""
