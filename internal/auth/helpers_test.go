package auth_test

import (
	"regexp"
	"strconv"
)

func regexpMatch(re, s string) bool { return regexp.MustCompile(re).MatchString(s) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
