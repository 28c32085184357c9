"""A Django site of forms with side effects, each from a real package: a contact form
(django-contact-form: mails the site's managers), sign-up (django-registration's one-step
workflow: creates an active account) and Django's admin login. Mail goes to files in
``$REALAPPS_RUN/mail`` (Django's file backend), never out."""

import os
from pathlib import Path

RUN = Path(os.environ.get("REALAPPS_RUN", "."))
HERE = Path(__file__).resolve().parent
SECRET_KEY = os.environ.get("REALAPPS_SECRET", "realapps-local-only")
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
ROOT_URLCONF = "urls"
INSTALLED_APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                  "django.contrib.sessions", "django.contrib.messages", "django.contrib.staticfiles",
                  "django_registration"]
MIDDLEWARE = ["django.middleware.security.SecurityMiddleware", "django.contrib.sessions.middleware.SessionMiddleware",
              "django.middleware.common.CommonMiddleware", "django.middleware.csrf.CsrfViewMiddleware",
              "django.contrib.auth.middleware.AuthenticationMiddleware",
              "django.contrib.messages.middleware.MessageMiddleware"]
TEMPLATES = [{"BACKEND": "django.template.backends.django.DjangoTemplates", "DIRS": [HERE / "templates"],
              "APP_DIRS": True, "OPTIONS": {"context_processors": [
                  "django.template.context_processors.request", "django.contrib.auth.context_processors.auth",
                  "django.contrib.messages.context_processors.messages"]}}]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": RUN / "site.sqlite3"}}
EMAIL_BACKEND = "django.core.mail.backends.filebased.EmailBackend"
EMAIL_FILE_PATH = RUN / "mail"
DEFAULT_FROM_EMAIL = "site@localhost.invalid"
MANAGERS = [("Site manager", "manager@localhost.invalid")]
REGISTRATION_OPEN = True
LOGIN_REDIRECT_URL = "/"
STATIC_URL = "/static/"
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
