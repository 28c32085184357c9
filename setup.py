# Only because `scrapyd-deploy` runs `python setup.py bdist_egg`: the package is described
# in setup.cfg (the Scrapy entry point that tells scrapyd where the settings are included).
from setuptools import setup

setup()
