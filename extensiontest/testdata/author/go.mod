module example.com/greeter

go 1.26.0

require github.com/open-conduit/open-conduit v0.0.0

replace github.com/open-conduit/open-conduit => ../../..
