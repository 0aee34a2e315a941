"""urls.mask and urls.problem: database URLs judged on their text alone."""

import urllib.parse

from grant_scheduler import exception
from grant_scheduler import urls
from grant_scheduler.conf import database as db_conf
from grant_scheduler.db import sa_compat
from tests import base

# Passwords with distinctive pieces around each special character: no piece
# may survive masking.
SPECIALS = "@:/%#$?& '\""


def password_with(char):
    return "Left1xq%sRight2zw" % char


PIECES = ("Left1xq", "Right2zw")


class TestMaskUrl(base.TestCase):
    def assertMasked(self, url, *shown):
        masked = urls.mask(url)
        for piece in PIECES:
            self.assertNotIn(piece, masked, url)
        for text in shown:
            self.assertIn(text, masked, url)
        # Masking is idempotent.
        self.assertEqual(masked, urls.mask(masked))
        return masked

    def test_encoded_passwords(self):
        for char in SPECIALS:
            with self.subTest(char=char):
                encoded = urllib.parse.quote(password_with(char), safe="")
                self.assertMasked(
                    "mysql+pymysql://gs:%s@db.example.org:3306/gs" % encoded,
                    "mysql+pymysql://gs:***@db.example.org:3306/gs",
                )

    def test_raw_passwords(self):
        for char in SPECIALS + "@@" + "/:":
            with self.subTest(char=char):
                self.assertMasked(
                    "mysql+pymysql://gs:%s@db.example.org:3306/gs"
                    % password_with(char),
                    "mysql+pymysql://gs:***@",
                )

    def test_raw_at_followed_by_a_port_like_piece(self):
        self.assertMasked(
            "mysql+pymysql://gs:Left1xq@Right2zw:12@127.0.0.1:3306/gs",
            "gs:***@127.0.0.1:3306/gs",
        )

    def test_credentials_in_the_query(self):
        for key in ("password", "PASSWORD", "passwd", "pwd", "auth_token"):
            with self.subTest(key=key):
                self.assertMasked(
                    "mysql+pymysql://gs@db/gs?charset=utf8&%s=Left1xq@"
                    "Right2zw&ssl=1" % key,
                    "gs@db/gs?charset=utf8&%s=***&ssl=1" % key,
                )
        self.assertMasked(
            "postgresql:///gs?host=/run/pg&password=Left1xqRight2zw",
            "postgresql:///gs?host=/run/pg&password=***",
        )

    def test_port_that_is_not_a_number(self):
        self.assertMasked(
            "mysql+pymysql://gs:Left1xq@db:Right2zw/gs", "gs:***@db:***/gs"
        )
        # The "@" forgotten: the password would read as a port.
        self.assertMasked("mysql+pymysql://gs:Left1xqRight2zw/gs", "gs:***/gs")

    def test_without_a_scheme(self):
        self.assertMasked("gs:Left1xqRight2zw@db.example.org/gs", "gs:***@")

    def test_nothing_to_mask(self):
        for url in (
            "sqlite:///grant_scheduler.sqlite",
            "sqlite:////tmp/a@b/gs.sqlite",
            "mysql+pymysql://gs@db/gs",
            "mysql+pymysql://db:3306/gs?charset=utf8",
            "mysql+pymysql://gs:***@[::1]:3306/gs",
            "not a url at all",
        ):
            with self.subTest(url=url):
                self.assertEqual(url, urls.mask(url))
        self.assertIsNone(urls.mask(None))

    def test_url_objects(self):
        url = sa_compat.make_url("mysql+pymysql://gs:Left1xqRight2zw@db/gs")
        self.assertEqual("mysql+pymysql://gs:***@db/gs", urls.mask(url))


class TestUrlProblem(base.TestCase):
    def test_encoded_urls_pass(self):
        for char in SPECIALS:
            with self.subTest(char=char):
                encoded = urllib.parse.quote(password_with(char), safe="")
                url = "mysql+pymysql://gs:%s@127.0.0.1:3306/gs" % encoded
                self.assertIsNone(urls.problem(url))
                db_conf.check_url(url)
                parsed = sa_compat.make_url(url)
                self.assertEqual(password_with(char), parsed.password)

    def test_raw_delimiters_are_refused(self):
        for char in ("@", "/", "?", "#", "%", "@:", ":@", "/:", "%4"):
            url = "mysql+pymysql://gs:%s@127.0.0.1/gs" % password_with(char)
            with self.subTest(char=char):
                self.assertIn("percent-encoded", urls.problem(url))
                with self.assertRaises(
                    exception.DatabaseConfigError
                ) as caught:
                    db_conf.check_url(url)
                for piece in PIECES:
                    self.assertNotIn(piece, str(caught.exception))

    def test_raw_characters_sqlalchemy_reads_right_pass(self):
        # ":", "&", space and quotes are read as meant by every SQLAlchemy.
        for char in (":", "&", " ", "'", '"', "!", "*"):
            url = "mysql+pymysql://gs:%s@127.0.0.1/gs" % password_with(char)
            with self.subTest(char=char):
                self.assertIsNone(urls.problem(url))
                self.assertEqual(
                    password_with(char), sa_compat.make_url(url).password
                )

    def test_port_that_is_not_a_number(self):
        for port in ("abc", "3306x", "-1"):
            url = "mysql+pymysql://gs:pw@127.0.0.1:%s/gs" % port
            with self.subTest(port=port):
                self.assertEqual("its port is not a number", urls.problem(url))

    def test_no_scheme(self):
        self.assertIn("scheme", urls.problem("gs:pw@db.example.org/gs"))

    def test_good_urls(self):
        for url in (
            "sqlite://",
            "sqlite:///grant_scheduler.sqlite",
            "sqlite:////tmp/a@b/gs.sqlite",
            "mysql+pymysql://gs@db/gs",
            "mysql+pymysql://gs:pw@db:3306/gs?charset=utf8",
            "mysql+pymysql://gs:pw@[::1]:3306/gs",
            "postgresql+psycopg2://gs:pw@db/gs?sslmode=require",
            "postgresql:///gs?host=/run/postgresql",
        ):
            with self.subTest(url=url):
                self.assertIsNone(urls.problem(url))
        db_conf.check_url("")
        db_conf.check_url(None)
