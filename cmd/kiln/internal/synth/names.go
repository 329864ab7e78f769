package synth

import "strings"

// Surnames is the list family names are drawn from: common names of the
// United States and Europe, some with diacritics, so that searches by
// prefix meet the accent and case rules of FHIR string search. The load
// scenario draws 3-letter prefixes from it.
var Surnames = strings.Fields(`
Smith Johnson Williams Brown Jones Garcia Miller Davis Rodriguez Martinez
Hernandez Lopez Gonzalez Wilson Anderson Thomas Taylor Moore Jackson Martin
Lee Perez Thompson White Harris Sanchez Clark Ramirez Lewis Robinson
Walker Young Allen King Wright Scott Torres Nguyen Hill Flores
Green Adams Nelson Baker Hall Rivera Campbell Mitchell Carter Roberts
Gomez Phillips Evans Turner Diaz Parker Cruz Edwards Collins Reyes
Stewart Morris Morales Murphy Cook Rogers Gutierrez Ortiz Morgan Cooper
Peterson Bailey Reed Kelly Howard Ramos Kim Cox Ward Richardson
Watson Brooks Chavez Wood James Bennett Gray Mendoza Ruiz Hughes
Price Alvarez Castillo Sanders Patel Myers Long Ross Foster Jimenez
Powell Jenkins Perry Russell Sullivan Bell Coleman Butler Henderson Barnes
Gonzales Fisher Vasquez Simmons Romero Jordan Patterson Alexander Hamilton Graham
Reynolds Griffin Wallace Moreno West Cole Hayes Bryant Herrera Gibson
Ellis Tran Medina Aguilar Stevens Murray Ford Castro Marshall Owens
Harrison Fernandez McDonald Woods Washington Kennedy Wells Vargas Henry Chen
Freeman Webb Tucker Guzman Burns Crawford Olson Simpson Porter Hunter
Gordon Mendez Silva Shaw Snyder Mason Dixon Munoz Hunt Hicks
Holmes Palmer Wagner Black Robertson Boyd Rose Stone Salazar Fox
Warren Mills Meyer Rice Schmidt Garza Daniels Ferguson Nichols Stephens
Soto Weaver Ryan Gardner Payne Grant Dunn Kelley Spencer Hawkins
Arnold Pierce Vazquez Hansen Peters Santos Hart Bradley Knight Elliott
Cunningham Duncan Armstrong Hudson Carroll Lane Riley Andrews Alvarado Ray
Delgado Berry Perkins Hoffman Johnston Matthews Pena Richards Contreras Willis
Carpenter Lawrence Sandoval Guerrero George Chapman Rios Estrada Ortega Watkins
Greene Nunez Wheeler Valdez Harper Burke Larson Santiago Maldonado Morrison
Franklin Carlson Austin Dominguez Carr Lawson Jacobs Obrien Lynch Singh
Vega Bishop Montgomery Oliver Jensen Harvey Williamson Gilbert Dean Sims
Espinoza Howell Li Wong Reid Hanson Le McCoy Garrett Burton
Fuller Wang Weber Welch Rojas Lucas Marquez Fields Park Yang
Little Banks Padilla Day Walsh Bowman Schultz Luna Fowler Mejia
Davidson Acosta Brewer May Holland Juarez Newman Pearson Curtis Cortez
Douglas Schneider Joseph Barrett Navarro Figueroa Keller Avila Wade Molina
Stanley Hopkins Campos Barnett Bates Chambers Caldwell Beck Lambert Miranda
Byrd Craig Ayala Lowe Frazier Powers Neal Leonard Gregory Carrillo
Sutton Fleming Rhodes Shelton Schwartz Norris Jennings Watts Duran Walters
Cohen McDaniel Moran Parks Steele Vaughn Becker Holt Deleon Barker
Terry Hale Leon Hess Benson Haynes Horton Miles Lyons Pham
Graves Bush Thornton Wolfe Warner Cabrera McKinney Mann Zimmerman Dawson
Lara Fletcher Page McCarthy Love Robles Cervantes Solis Erickson Reeves
Müller Schäfer Schröder Köhler Krüger Bäumer Groß Jäger Vogel Hofmann
Núñez Muñoz Peña Ibáñez Gómez Martínez Fernández Rodríguez González Sánchez
Pérez Jiménez Álvarez Díaz Hernández López García Ramírez Suárez Domínguez
Dubois Lefèvre Lefebvre Girard Bonnet Dupont Roux Fontaine Rousseau Moreau
Laurent Fournier Mercier Blanc Guérin Faure André Chevalier François Gauthier
Rossi Russo Ferrari Esposito Bianchi Romano Colombo Ricci Marino Greco
Bruno Gallo Conti DeLuca Mancini Costa Giordano Rizzo Lombardi Moretti
Jansen DeVries VanDijk Bakker Visser Smit Meijer DeBoer Mulder DeGroot
Nowak Kowalski Wiśniewski Wójcik Kowalczyk Kamiński Lewandowski Zieliński Szymański Woźniak
Johansson Andersson Karlsson Nilsson Eriksson Larsson Olsson Persson Svensson Gustafsson
Nielsen Pedersen Christensen Sørensen Rasmussen Jørgensen Madsen Kristensen Østergaard Søndergaard
Silveira Conceição Gonçalves Magalhães Simões Araújo Ribeiro Carvalho Lourenço Fonseca
Novák Dvořák Černý Procházka Kučera Horváth Nagy Tóth Szabó Kovács
Yılmaz Kaya Demir Şahin Çelik Öztürk Aydın Özdemir Arslan Doğan
OBrien OConnor Keane Walshe Byrne Doyle Quinn Gallagher Brennan Fitzgerald
`)

// Given names by administrative gender.
var (
	GivenFemale = strings.Fields(`
Mary Patricia Jennifer Linda Elizabeth Barbara Susan Jessica Sarah Karen
Lisa Nancy Betty Margaret Sandra Ashley Kimberly Emily Donna Michelle
Carol Amanda Dorothy Melissa Deborah Stephanie Rebecca Sharon Laura Cynthia
Kathleen Amy Angela Shirley Anna Brenda Pamela Emma Nicole Helen
Samantha Katherine Christine Debra Rachel Carolyn Janet Catherine Maria Heather
Diane Ruth Julie Olivia Joyce Virginia Victoria Kelly Lauren Christina
Chloé Zoë Renée Inés Lucía Sofía María Marta Ana Léa
Ingrid Astrid Greta Gudrun Anaïs Noémie Élodie Irène Björk Ewa
`)
	GivenMale = strings.Fields(`
James Robert John Michael David William Richard Joseph Thomas Charles
Christopher Daniel Matthew Anthony Mark Donald Steven Paul Andrew Joshua
Kenneth Kevin Brian George Timothy Ronald Edward Jason Jeffrey Ryan
Jacob Gary Nicholas Eric Jonathan Stephen Larry Justin Scott Brandon
Benjamin Samuel Gregory Alexander Frank Patrick Raymond Jack Dennis Jerry
Tyler Aaron Jose Adam Nathan Henry Douglas Zachary Peter Kyle
André Björn Søren Jürgen Łukasz Tomás Joaquín Ángel Iñigo Raúl
Hélio João Émile Jérôme François Lars Mateusz Ömer Çağan Dávid
`)
)
