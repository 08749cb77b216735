module example.com/m

go 1.26

require example.com/single v1.0.0

require (
	example.com/a v1.0.0
	example.com/b/v2 v2.1.0 // a comment
	example.com/c v0.1.0 // indirect
)

require example.com/d v1.0.0 // indirect
